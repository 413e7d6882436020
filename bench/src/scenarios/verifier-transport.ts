import { makeRow } from '../lib/result-schema';
import { rotate, withWorkers, type Scenario } from '../lib/scenario';
import { watchCpu } from '../lib/workers';

const ROW = { name: 'verifier_transport_ratio', unit: 'checks/s', baselineName: 'echo RPC, same gRPC stream pattern', target: 0.9 };
const IN_FLIGHT = 64;

/**
 * Checks through the real verifier process over VerifyStream (the pattern
 * @service-relay/verifier-client uses) vs the bench echo server over the same
 * pattern; the load generator is its own process.
 */
export const verifierTransport: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const [echo, load] = await Promise.all([spawn('grpc-echo-server'), spawn('grpc-load')]);
      const { port } = await echo.call<{ port: number }>('start');
      const targets = { ours: stack.verifierAddr, echo: `127.0.0.1:${port}` } as const;
      const figures: Record<keyof typeof targets, number[]> = { ours: [], echo: [] };
      let limitedBy = '';
      let echoLimitedBy = '';
      let invalid = 0;
      let firstReason: string | undefined;
      for (let round = 0; round < budget.runs; round++) {
        for (const name of rotate(['ours', 'echo'] as const, round)) {
          const cpu = await watchCpu([name === 'ours' ? stack.workers.verifier : echo, load]);
          const r = await load.call<{ rate: number; invalid: number; firstReason?: string }>('run', {
            target: name === 'ours' ? 'verifier' : 'echo',
            address: targets[name],
            key: stack.key,
            internalToken: stack.internalToken,
            inFlight: IN_FLIGHT,
            warmupMs: round === 0 ? budget.warmupSeconds * 1000 : 300,
            ms: budget.seconds * 1000,
          });
          if (name === 'echo') echoLimitedBy = await cpu();
          if (name === 'ours') {
            limitedBy = await cpu();
            invalid += r.invalid;
            firstReason ??= r.firstReason;
          }
          figures[name].push(r.rate);
        }
      }
      if (invalid > 0) throw new Error(`the verifier refused ${invalid} valid bench tokens (${firstReason})`);
      return [makeRow({ ...ROW, ours: figures.ours, baseline: figures.echo, quick: budget.quick, limitedBy, baselineLimitedBy: echoLimitedBy, note: `${IN_FLIGHT} in flight over one bidi stream` })];
    }),
};
