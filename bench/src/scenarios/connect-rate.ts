import { startPeer } from '../lib/peers';
import { failedRow, makeRow } from '../lib/result-schema';
import { rotate, sleep, withWorkers, type Scenario } from '../lib/scenario';
import type { TenantKey } from '../lib/tokens';
import { summarize } from '../lib/stats';
import { watchCpu, type WorkerHandle } from '../lib/workers';
import type { Level, Variant } from '../lib/ws-protocols';

const ROW = { name: 'connect_rate_ratio', unit: 'conn/s', baselineName: 'bare ws handshakes', target: 0.5 };
const NATS = { name: 'connect_subscribe_vs_nats', unit: 'conn/s', baselineName: 'nats-server over WebSocket', target: 1.0 };
/** #34 item 1: the same connect + subscribe through the one origin of `npm start` (the gateway's port), at least 0.8x nats-server's. */
const GATEWAY = { name: 'gateway_connect_subscribe_vs_nats', unit: 'conn/s', baselineName: 'nats-server over WebSocket', target: 0.8 };
const CLIENT_PROCESSES = 2;
const IN_FLIGHT_PER_PROCESS = 25;
/** The one channel every connect+subscribe joins (many users entering one room). */
const CHANNEL = 'bench-connect';

type Target = 'relay' | 'ws' | 'relaySub' | 'floor' | 'origin' | 'nats';
interface TargetSpec {
  variant: Variant;
  level: Level;
  base: string;
  server: WorkerHandle;
  key?: TenantKey;
  topic?: string;
}

/**
 * Three rows, six targets measured in turns:
 * - `connect_rate_ratio`: authenticated WebSocket connects/s (each a distinct
 *   user's token checked by the verifier before the upgrade completes) vs bare
 *   ws handshakes/s.
 * - `connect_subscribe_vs_nats`: the same connect, then the `ready` frame, a
 *   `subscribe` to one channel and its `subscribed` answer, vs nats-server
 *   over WebSocket doing the upgrade, INFO, CONNECT + SUB + PING answered by
 *   PONG (the server has then registered the client and its SUB).
 * - `gateway_connect_subscribe_vs_nats`: the same through `npm start`'s port.
 * And, in the same turns, the floor under the second: the bare ws server
 * answering `ready` and `subscribed` to the same clients, with nothing
 * checked or stored (what no work in realtime can go below), in its note.
 * The connections are held until the run ends, then closed.
 */
export const connectRate: Scenario = {
  rows: [ROW, NATS, GATEWAY],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const [ws, ...clients] = await Promise.all([spawn('ws-baseline'), ...Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('ws-clients', { label: `clients-${i + 1}` }))]);
      const { port } = await ws.call<{ port: number }>('start');
      const nats = await startPeer(spawn, 'nats');
      const per = Math.ceil(budget.connects / CLIENT_PROCESSES);
      const topic = `tenants/${stack.key.tenantId}/channels/${CHANNEL}`;
      const relay = stack.workers.realtime;
      const targets: Partial<Record<Target, TargetSpec>> = {
        relay: { variant: 'relay', level: 'open', base: stack.realtimeWs, server: relay, key: stack.key },
        ws: { variant: 'ws', level: 'open', base: `ws://127.0.0.1:${port}`, server: ws },
        relaySub: { variant: 'relay', level: 'subscribed', base: stack.realtimeWs, server: relay, key: stack.key, topic },
        // The floor of a connect + subscribe in Node and `ws`: the bare ws server answering the same frames (`ready`,
        // `subscribed`) to the same clients, checking and storing nothing. Not a row: the note of connect_subscribe_vs_nats.
        floor: { variant: 'relay', level: 'subscribed', base: `ws://127.0.0.1:${port}`, server: ws, key: stack.key, topic },
      };
      const origin = await stack.oneOrigin();
      targets.origin = { variant: 'relay', level: 'subscribed', base: origin.gatewayWs, server: origin.host, key: origin.key, topic: `tenants/${origin.key.tenantId}/channels/${CHANNEL}` };
      if (typeof nats !== 'string') targets.nats = { variant: 'nats', level: 'subscribed', base: nats.base, server: nats.worker, topic };
      const order = Object.keys(targets) as Target[];
      // The CPU shares are taken over the connects alone (closing them and the pause after would dilute them).
      const once = async (target: Target, count: number) => {
        const t = targets[target]!;
        const watched = [t.server, stack.workers.verifier, ...clients];
        const cpu = await watchCpu(watched);
        const before = await Promise.all(watched.map((w) => w.usage()));
        const results = await Promise.all(
          clients.map((c) =>
            c.call<{ opened: number; ms: number; firstError?: string }>('open', { group: 'rate', variant: t.variant, base: t.base, count, concurrency: IN_FLIGHT_PER_PROCESS, level: t.level, key: t.key, topic: t.topic }),
          ),
        );
        const busiest = await cpu();
        const after = await Promise.all(watched.map((w) => w.usage()));
        const cpuUs = (i: number) => after[i]!.userUs - before[i]!.userUs + after[i]!.systemUs - before[i]!.systemUs;
        // CPU time per connect of the server, the verifier and the two client processes together: what the
        // machine pays for one connect, which other load on the machine moves much less than connects/s.
        const perConnect = { server: cpuUs(0), verifier: cpuUs(1), clients: cpuUs(2) + cpuUs(3) };
        await Promise.all(clients.map((c) => c.call('close', { group: 'rate' })));
        await sleep(300);
        const opened = results.reduce((s, r) => s + r.opened, 0);
        if (opened < count * CLIENT_PROCESSES) throw new Error(`${target}: ${opened} of ${count * CLIENT_PROCESSES} connected (${results.find((r) => r.firstError)?.firstError})`);
        const us = { server: perConnect.server / opened, verifier: perConnect.verifier / opened, clients: perConnect.clients / opened };
        return { rate: (opened / Math.max(...results.map((r) => r.ms))) * 1000, busiest, us };
      };
      // Warm-up: one whole run of each, discarded. Every server and both client
      // processes were still compiling through a quarter run: the first timed
      // round read about half the later ones, for bare ws as for ours.
      for (const t of order) await once(t, per);
      const figures: Record<Target, number[]> = { relay: [], ws: [], relaySub: [], floor: [], origin: [], nats: [] };
      const busiest: Record<Target, string> = { relay: '', ws: '', relaySub: '', floor: '', origin: '', nats: '' };
      const us: Record<Target, Array<{ server: number; verifier: number; clients: number }>> = { relay: [], ws: [], relaySub: [], floor: [], origin: [], nats: [] };
      for (let round = 0; round < budget.connectRuns; round++) {
        for (const t of rotate(order, round)) {
          const { rate, busiest: cpu, us: perConnect } = await once(t, per);
          figures[t].push(rate);
          us[t].push(perConnect);
          busiest[t] = cpu;
        }
      }
      const note = `${per * CLIENT_PROCESSES} connections per run, ${IN_FLIGHT_PER_PROCESS * CLIENT_PROCESSES} in flight`;
      // Median CPU-µs per connect over the rounds (Redis is shared with the rest of the machine and not counted).
      const cpuOf = (t: Target, server: string, verifier: boolean) => {
        const m = (k: 'server' | 'verifier' | 'clients') => Math.round(summarize(us[t].map((u) => u[k])).median);
        return `${server} ${m('server')}${verifier ? `, verifier ${m('verifier')}` : ''}, clients ${m('clients')}`;
      };
      return [
        makeRow({ ...ROW, ours: figures.relay, baseline: figures.ws, quick: budget.quick, limitedBy: busiest.relay, baselineLimitedBy: busiest.ws, note: `${note}; CPU-µs per connect: ours ${cpuOf('relay', 'realtime', true)}; bare ws ${cpuOf('ws', 'ws-baseline', false)}` }),
        ...(typeof nats === 'string'
          ? [failedRow(NATS.name, NATS.unit, NATS.baselineName, NATS.target, nats), failedRow(GATEWAY.name, GATEWAY.unit, GATEWAY.baselineName, GATEWAY.target, nats)]
          : [
              makeRow({
                ...NATS,
                baselineName: `nats-server ${nats.version} over WebSocket`,
                ours: figures.relaySub,
                baseline: figures.nats,
                quick: budget.quick,
                limitedBy: busiest.relaySub,
                baselineLimitedBy: busiest.nats,
                note: `${note}, each subscribing to one shared channel; ours: upgrade (token verified), ready, subscribe, subscribed; nats: upgrade, INFO, CONNECT + SUB + PING, PONG; CPU-µs per connect: ours ${cpuOf('relaySub', 'realtime', true)}; nats ${cpuOf('nats', 'nats-server', false)}; ${floorNote(figures.floor, figures.nats, cpuOf('floor', 'ws-baseline', false))}`,
              }),
              makeRow({
                ...GATEWAY,
                baselineName: `nats-server ${nats.version} over WebSocket`,
                ours: figures.origin,
                baseline: figures.nats,
                quick: budget.quick,
                limitedBy: busiest.origin,
                baselineLimitedBy: busiest.nats,
                note: `${note}; ours through npm start's gateway port (every service in one process; the gateway hands the upgrade to realtime), the same connect + subscribe; CPU-µs per connect: ours ${cpuOf('origin', 'npm start', false)}; nats ${cpuOf('nats', 'nats-server', false)}`,
              }),
            ]),
      ];
    }),
};

/** The floor's figures (median conn/s, its ratio to nats-server's, its CPU) for the note. */
function floorNote(floor: number[], nats: number[], cpu: string): string {
  const f = summarize(floor).median;
  const n = summarize(nats).median;
  return `floor (a bare ws server answering ready and subscribed to the same clients, checking and storing nothing): ${Math.round(f).toLocaleString('en-US')} conn/s, ${(f / n).toFixed(2)}x nats-server; CPU-µs per connect ${cpu}`;
}
