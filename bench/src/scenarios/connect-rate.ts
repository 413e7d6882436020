import { startPeer } from '../lib/peers';
import { failedRow, makeRow } from '../lib/result-schema';
import { rotate, sleep, withWorkers, type Scenario } from '../lib/scenario';
import type { TenantKey } from '../lib/tokens';
import { watchCpu, type WorkerHandle } from '../lib/workers';
import type { Variant } from '../lib/ws-protocols';

const ROW = { name: 'connect_rate_ratio', unit: 'conn/s', baselineName: 'bare ws handshakes', target: 0.5 };
const NATS = { name: 'connect_rate_vs_nats', unit: 'conn/s', baselineName: 'nats-server over WebSocket', target: 0.5 };
const CLIENT_PROCESSES = 2;
const IN_FLIGHT_PER_PROCESS = 25;

/**
 * Authenticated WebSocket connects/s (each a distinct user's token checked
 * by the verifier before the upgrade completes) vs bare ws handshakes/s; the
 * connections are held until the run ends, then closed. Also vs nats-server
 * over WebSocket, a connect there being the upgrade, INFO, CONNECT and a
 * PING answered by PONG (the server has then registered the client).
 */
export const connectRate: Scenario = {
  rows: [ROW, NATS],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const [ws, ...clients] = await Promise.all([spawn('ws-baseline'), ...Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('ws-clients', { label: `clients-${i + 1}` }))]);
      const { port } = await ws.call<{ port: number }>('start');
      const nats = await startPeer(spawn, 'nats');
      const per = Math.ceil(budget.connects / CLIENT_PROCESSES);
      type Target = 'relay' | 'ws' | 'nats';
      const targets: Partial<Record<Target, { base: string; server: WorkerHandle; key?: TenantKey }>> = {
        relay: { base: stack.realtimeWs, server: stack.workers.realtime, key: stack.key },
        ws: { base: `ws://127.0.0.1:${port}`, server: ws },
      };
      if (typeof nats !== 'string') targets.nats = { base: nats.base, server: nats.worker };
      const variants = Object.keys(targets) as Target[];
      // The CPU shares are taken over the connects alone (closing them and the pause after would dilute them).
      const once = async (variant: Variant & Target, count: number) => {
        const t = targets[variant]!;
        const cpu = await watchCpu([t.server, stack.workers.verifier, ...clients]);
        const results = await Promise.all(
          clients.map((c) => c.call<{ opened: number; ms: number; firstError?: string }>('open', { group: 'rate', variant, base: t.base, count, concurrency: IN_FLIGHT_PER_PROCESS, level: 'open', key: t.key })),
        );
        const busiest = await cpu();
        await Promise.all(clients.map((c) => c.call('close', { group: 'rate' })));
        await sleep(300);
        const opened = results.reduce((s, r) => s + r.opened, 0);
        if (opened < count * CLIENT_PROCESSES) throw new Error(`${variant}: ${opened} of ${count * CLIENT_PROCESSES} connected (${results.find((r) => r.firstError)?.firstError})`);
        return { rate: (opened / Math.max(...results.map((r) => r.ms))) * 1000, busiest };
      };
      // Warm-up: one whole run of each, discarded. Every server and both client
      // processes were still compiling through a quarter run: the first timed
      // round read about half the later ones, for bare ws as for ours.
      for (const v of variants) await once(v, per);
      const figures: Record<Target, number[]> = { relay: [], ws: [], nats: [] };
      const busiest: Record<Target, string> = { relay: '', ws: '', nats: '' };
      for (let round = 0; round < budget.connectRuns; round++) {
        for (const v of rotate(variants, round)) {
          const { rate, busiest: cpu } = await once(v, per);
          figures[v].push(rate);
          busiest[v] = cpu;
        }
      }
      const note = `${per * CLIENT_PROCESSES} connections per run, ${IN_FLIGHT_PER_PROCESS * CLIENT_PROCESSES} in flight`;
      return [
        makeRow({ ...ROW, ours: figures.relay, baseline: figures.ws, quick: budget.quick, limitedBy: busiest.relay, baselineLimitedBy: busiest.ws, note }),
        typeof nats === 'string'
          ? failedRow(NATS.name, NATS.unit, NATS.baselineName, NATS.target, nats)
          : makeRow({ ...NATS, baselineName: `nats-server ${nats.version} over WebSocket`, ours: figures.relay, baseline: figures.nats, quick: budget.quick, limitedBy: busiest.relay, baselineLimitedBy: busiest.nats, note: `${note}; a nats connect: upgrade, INFO, CONNECT, PING/PONG` }),
      ];
    }),
};
