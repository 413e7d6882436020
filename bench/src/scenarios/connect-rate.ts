import { makeRow } from '../lib/result-schema';
import { rotate, sleep, withWorkers, type Scenario } from '../lib/scenario';
import type { TenantKey } from '../lib/tokens';
import { watchCpu, type WorkerHandle } from '../lib/workers';
import type { Variant } from '../lib/ws-protocols';

const ROW = { name: 'connect_rate_ratio', unit: 'conn/s', baselineName: 'bare ws handshakes', target: 0.5 };
const CLIENT_PROCESSES = 2;
const IN_FLIGHT_PER_PROCESS = 25;

/**
 * Authenticated WebSocket connects/s (each a distinct user's token checked
 * by the verifier before the upgrade completes) vs bare ws handshakes/s; the
 * connections are held until the run ends, then closed.
 */
export const connectRate: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const [ws, ...clients] = await Promise.all([spawn('ws-baseline'), ...Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('ws-clients', { label: `clients-${i + 1}` }))]);
      const { port } = await ws.call<{ port: number }>('start');
      const per = Math.ceil(budget.connects / CLIENT_PROCESSES);
      const targets: Record<'relay' | 'ws', { base: string; server: WorkerHandle; key?: TenantKey }> = {
        relay: { base: stack.realtimeWs, server: stack.workers.realtime, key: stack.key },
        ws: { base: `ws://127.0.0.1:${port}`, server: ws },
      };
      const once = async (variant: Variant & ('relay' | 'ws'), count: number) => {
        const t = targets[variant];
        const results = await Promise.all(
          clients.map((c) => c.call<{ opened: number; ms: number; firstError?: string }>('open', { group: 'rate', variant, base: t.base, count, concurrency: IN_FLIGHT_PER_PROCESS, level: 'open', key: t.key })),
        );
        await Promise.all(clients.map((c) => c.call('close', { group: 'rate' })));
        await sleep(300);
        const opened = results.reduce((s, r) => s + r.opened, 0);
        if (opened < count * CLIENT_PROCESSES) throw new Error(`${variant}: ${opened} of ${count * CLIENT_PROCESSES} connected (${results.find((r) => r.firstError)?.firstError})`);
        return (opened / Math.max(...results.map((r) => r.ms))) * 1000;
      };
      for (const v of ['relay', 'ws'] as const) await once(v, Math.ceil(per / 4));
      const figures: Record<'relay' | 'ws', number[]> = { relay: [], ws: [] };
      const busiest: Record<'relay' | 'ws', string> = { relay: '', ws: '' };
      for (let round = 0; round < budget.runs; round++) {
        for (const v of rotate(['relay', 'ws'] as const, round)) {
          const cpu = await watchCpu([targets[v].server, stack.workers.verifier, ...clients]);
          figures[v].push(await once(v, per));
          busiest[v] = await cpu();
        }
      }
      return [makeRow({ ...ROW, ours: figures.relay, baseline: figures.ws, quick: budget.quick, limitedBy: busiest.relay, baselineLimitedBy: busiest.ws, note: `${per * CLIENT_PROCESSES} connections per run, ${IN_FLIGHT_PER_PROCESS * CLIENT_PROCESSES} in flight` })];
    }),
};
