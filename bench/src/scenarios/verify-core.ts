import { makeRow } from '../lib/result-schema';
import { withWorkers, type Scenario } from '../lib/scenario';
import { watchCpu } from '../lib/workers';

const ROW = { name: 'verify_core_ratio', unit: 'checks/cpu-s', baselineName: 'node:crypto HMAC-SHA256 + timingSafeEqual', target: 0.5 };

/** The verifier's in-process check vs the raw HMAC, alternating in one process on one core. */
export const verifyCore: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget } = ctx;
      const w = await spawn('verify-core');
      await w.call('setup', { key: ctx.stack.key, count: 1024 });
      const ms = budget.quick ? 300 : 2000;
      for (const which of ['ours', 'raw']) await w.call('measure', { which, ms: budget.warmupSeconds * 1000 });
      const ours: number[] = [];
      const raw: number[] = [];
      let limitedBy = '';
      let rawLimitedBy = '';
      for (let round = 0; round < budget.runs; round++) {
        let cpu = await watchCpu([w]);
        ours.push(await w.call<number>('measure', { which: 'ours', ms }));
        limitedBy = await cpu();
        cpu = await watchCpu([w]);
        raw.push(await w.call<number>('measure', { which: 'raw', ms }));
        rawLimitedBy = await cpu();
      }
      return [makeRow({ ...ROW, ours, baseline: raw, quick: budget.quick, limitedBy, baselineLimitedBy: rawLimitedBy, note: 'one process, one core, 1024 distinct tokens; per second of the process CPU time' })];
    }),
};
