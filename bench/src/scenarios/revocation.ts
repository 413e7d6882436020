import { makeRow } from '../lib/result-schema';
import { sleep, withWorkers, type Scenario } from '../lib/scenario';
import { percentile } from '../lib/stats';
import { watchCpu } from '../lib/workers';

const ROW = { name: 'revocation_ms_p99', unit: 'ms', baselineName: 'contract bound (1 s)', target: 1.0 };
const BOUND_MS = 1000;

interface Closed {
  total: number;
  closed: number;
  times: number[];
  codes: Record<string, number>;
}

/**
 * Disable a tenant through the admin API and time, from just before the
 * call, until the last of its connections (half on each of two realtime
 * processes sharing Redis) is closed with 4401, as the clients see it.
 */
export const revocation: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const key = await stack.createTenant();
      const second = await stack.startRealtime('realtime-b');
      try {
        const instances = [stack.realtimeWs, second.ws];
        const clients = await Promise.all(instances.map((_, i) => spawn('ws-clients', { label: `clients-${i + 1}` })));
        const per = Math.ceil(budget.revoked / instances.length);
        const lasts: number[] = [];
        const p99s: number[] = [];
        let limitedBy = '';
        for (let round = 0; round < budget.boundRuns; round++) {
          const group = `revoke-${round}`;
          const opened = await Promise.all(
            clients.map((c, i) => c.call<{ opened: number; firstError?: string }>('open', { group, variant: 'relay', base: instances[i], count: per, concurrency: 25, level: 'ready', key })),
          );
          const n = opened.reduce((s, o) => s + o.opened, 0);
          if (n < per * instances.length) throw new Error(`only ${n} connections opened (${opened.find((o) => o.firstError)?.firstError})`);
          await sleep(200);
          const cpu = await watchCpu([stack.workers.registry, stack.workers.realtime, second.worker, stack.workers.verifier, ...clients]);
          const t0 = Date.now();
          await stack.admin(`/admin/tenants/${key.tenantId}/disable`);
          const results = await Promise.all(clients.map((c) => c.call<Closed>('awaitClosed', { group, timeoutMs: 10_000 })));
          limitedBy = await cpu();
          const times = results.flatMap((r) => r.times).map((t) => t - t0);
          const closed = results.reduce((s, r) => s + r.closed, 0);
          const wrong = results.flatMap((r) => Object.entries(r.codes)).filter(([code]) => code !== '4401');
          if (closed < n) throw new Error(`${n - closed} of ${n} connections still open 10 s after disable`);
          if (wrong.length > 0) throw new Error(`connections closed with other codes than 4401: ${JSON.stringify(wrong)}`);
          lasts.push(Math.max(...times));
          p99s.push(percentile(times, 99));
          await Promise.all(clients.map((c) => c.call('close', { group })));
          await stack.admin(`/admin/tenants/${key.tenantId}/enable`);
        }
        const p99 = [...p99s].sort((a, b) => a - b)[Math.floor(p99s.length / 2)]!;
        return [
          makeRow({
            ...ROW,
            ours: lasts,
            baseline: lasts.map(() => BOUND_MS),
            lowerIsBetter: true,
            quick: budget.quick,
            limitedBy,
            note: `${per * instances.length} connections over 2 realtime processes on Redis; figure = last close after the admin call started (p99 of closes ${p99.toFixed(0)} ms)`,
          }),
        ];
      } finally {
        await second.worker.stop();
      }
    }),
};
