import { makeRow } from '../lib/result-schema';
import { summarize } from '../lib/stats';
import { rotate, withWorkers, type Scenario } from '../lib/scenario';
import { watchCpu } from '../lib/workers';

const ROW = { name: 'verifier_transport_ratio', unit: 'checks/s', baselineName: 'same client, batched, no-check echo', target: 0.5 };
const IN_FLIGHT = 64;

type Target = 'ours' | 'echo' | 'echoBatch';

/**
 * Checks through the real verifier process as its callers make them (the
 * real @service-relay/verifier-client: one VerifyBatchStream, the checks of
 * one event-loop turn in one message, 64 in flight) vs the same client
 * against the echo server's no-check relay.auth.v1.TokenVerifier (the same
 * batched messages over the same transport, answered without checking): the
 * row is what the checks cost (issue #34: like for like). The note adds,
 * without a target, the echo server answering one check per message over one
 * bidi stream (EchoStream, what a plain gRPC stream pattern costs: the row's
 * baseline until #34, which compared batched against unbatched). The load
 * generator is its own process.
 */
export const verifierTransport: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const [echo, load] = await Promise.all([spawn('grpc-echo-server'), spawn('grpc-load')]);
      const { port } = await echo.call<{ port: number }>('start');
      const echoAddr = `127.0.0.1:${port}`;
      const plans = {
        ours: { target: 'verifier', pattern: 'client', address: stack.verifierAddr },
        echo: { target: 'echo', pattern: 'stream', address: echoAddr },
        echoBatch: { target: 'verifier', pattern: 'client', address: echoAddr },
      } as const;
      const figures: Record<Target, number[]> = { ours: [], echo: [], echoBatch: [] };
      const busiest: Record<Target, string> = { ours: '', echo: '', echoBatch: '' };
      let invalid = 0;
      let firstReason: string | undefined;
      for (let round = 0; round < budget.runs; round++) {
        for (const name of rotate(['ours', 'echo', 'echoBatch'] as const, round)) {
          const cpu = await watchCpu([name === 'ours' ? stack.workers.verifier : echo, load]);
          const r = await load.call<{ rate: number; invalid: number; firstReason?: string }>('run', {
            ...plans[name],
            key: stack.key,
            internalToken: stack.internalToken,
            inFlight: IN_FLIGHT,
            warmupMs: round === 0 ? budget.warmupSeconds * 1000 : 300,
            ms: budget.seconds * 1000,
          });
          busiest[name] = await cpu();
          if (name !== 'echo') {
            invalid += r.invalid;
            firstReason ??= r.firstReason;
          }
          figures[name].push(r.rate);
        }
      }
      if (invalid > 0) throw new Error(`${invalid} bench checks were refused or failed (${firstReason})`);
      const unbatched = summarize(figures.echo).median;
      const ours = summarize(figures.ours).median;
      const note =
        `both: verifier-client (VerifyBatchStream), ${IN_FLIGHT} in flight; baseline: the echo server's TokenVerifier, no check. ` +
        `Informational, no target (not like for like): the echo server answering one check per message over one bidi stream, ${IN_FLIGHT} in flight, ${Math.round(unbatched).toLocaleString('en-US')} checks/s ` +
        `(ours ${(ours / unbatched).toFixed(2)}× of it; busiest: ${busiest.echo})`;
      return [makeRow({ ...ROW, ours: figures.ours, baseline: figures.echoBatch, quick: budget.quick, limitedBy: busiest.ours, baselineLimitedBy: busiest.echoBatch, note })];
    }),
};
