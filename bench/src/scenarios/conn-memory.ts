import { startEmbedded } from '../lib/embedded';
import { startPeer } from '../lib/peers';
import { failedRow, makeRow } from '../lib/result-schema';
import { sleep, withWorkers, type Scenario } from '../lib/scenario';
import type { TenantKey } from '../lib/tokens';
import type { Usage } from '../lib/worker-runtime';
import type { WorkerHandle } from '../lib/workers';
import type { Level, Variant } from '../lib/ws-protocols';

// Issue #15: at most 1.3× the bare ws server's memory per connection (ratio = bare ÷ ours ≥ 1/1.3).
const ROW = { name: 'conn_memory_ratio', unit: 'KiB/conn', baselineName: 'bare ws server', target: 0.77 };
/** #34 item 1: memory per connection through the one origin (`npm start`: gateway and realtime together) at most nats-server's. */
const GATEWAY = { name: 'gateway_conn_memory_vs_nats', unit: 'KiB/conn', baselineName: 'nats-server over WebSocket', target: 1.0 };
const NATS = { name: 'conn_memory_vs_nats', unit: 'KiB/conn', baselineName: 'nats-server over WebSocket', target: 1.0 };
const CLIENT_PROCESSES = 2;
/**
 * Connections opened and closed before `before`, on every server alike, as a
 * share of the measured ones (500 before the full run's 2,000; 50 in
 * `--quick`). 50 before 2,000 loaded every code path but left the optimizing
 * compiler's work for the measured window: heap snapshots of realtime before
 * and after the 2,000 showed 1.3 code objects (516 B) per connection there,
 * compiled code of a process that was still warming up, billed to the
 * connections (bare ws 158 B); the per-connection RSS read 10.4 KiB ours, 6.7
 * bare ws. After 500 the compiler's growth inside the window is 390 B per
 * connection for realtime and both servers read lower (bench/README.md
 * "Compact batches and spare slots: the AMD EPYC table").
 */
const WARM_SHARE = 1 / 4;

/** Between the last connection opened and the reading, on every server alike. */
const SETTLE_MS = 1000;

/**
 * RSS per idle connection of a fresh server process of its own, so the
 * figure is that server's alone: the bare ws server vs our realtime with
 * authenticated connections, and a fresh nats-server per run (its
 * connections CONNECTed and PONGed). Every server is read the same way (issue
 * #34): RSS from `usage` as it stands, before the connections and SETTLE_MS
 * after the last one opened, no GC forced anywhere (a Go process has no full
 * GC to force from outside, so the Node processes get none either).
 */
export const connMemory: Scenario = {
  rows: [ROW, NATS, GATEWAY],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const clients = await Promise.all(Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('ws-clients', { label: `clients-${i + 1}` })));
      const per = Math.ceil(budget.idleConnections / CLIENT_PROCESSES);
      const total = per * CLIENT_PROCESSES;

      const measure = async (variant: Variant, server: WorkerHandle, base: string, level: Level, key?: TenantKey): Promise<number> => {
        const open = (group: string, count: number) =>
          Promise.all(clients.map((c) => c.call<{ opened: number; firstError?: string }>('open', { group, variant, base, count, concurrency: 25, level, key })));
        const close = (group: string) => Promise.all(clients.map((c) => c.call('close', { group })));
        // Warm every code path once, so lazy loading and JIT are not billed to connections.
        await open('warm', Math.ceil(per * WARM_SHARE));
        await close('warm');
        await sleep(300);
        const before = await server.call<Usage>('usage');
        const opened = await open('idle', per);
        const n = opened.reduce((s, o) => s + o.opened, 0);
        if (n < total) throw new Error(`${variant}: only ${n} of ${total} connections opened (${opened.find((o) => o.firstError)?.firstError})`);
        await sleep(SETTLE_MS);
        const after = await server.call<Usage>('usage');
        await close('idle');
        return (after.rss - before.rss) / n / 1024;
      };

      const ours: number[] = [];
      const bare: number[] = [];
      const nats: number[] = [];
      const origin: number[] = [];
      let natsMissing: string | undefined;
      let natsVersion = '';
      for (let round = 0; round < budget.runs; round++) {
        const peer = await startPeer(spawn, 'nats');
        if (typeof peer === 'string') natsMissing = peer;
        else {
          natsVersion = peer.version;
          try {
            nats.push(await measure('nats', peer.worker, peer.base, 'ready'));
          } finally {
            await peer.worker.stop();
          }
        }
        const ws = await spawn('ws-baseline', { label: 'ws-baseline' });
        const { port } = await ws.call<{ port: number }>('start');
        bare.push(await measure('ws', ws, `ws://127.0.0.1:${port}`, 'open'));
        await ws.stop();
        const rt = await stack.startRealtime('realtime-memory');
        try {
          ours.push(await measure('relay', rt.worker, rt.ws, 'ready', stack.key));
        } finally {
          await rt.worker.stop();
        }
        // The one origin (#34 item 1): a fresh `npm start` per run, its connections through the gateway's port.
        const one = await startEmbedded(spawn, 'one-origin-memory', { MAX_CONNECTIONS_PER_ADDRESS: stack.env.MAX_CONNECTIONS_PER_ADDRESS! });
        try {
          origin.push(await measure('relay', one.host, one.gatewayWs, 'ready', await one.createTenant()));
        } finally {
          await one.stop();
        }
      }
      return [
        makeRow({ ...ROW, ours, baseline: bare, lowerIsBetter: true, quick: budget.quick, note: `${total} idle connections, fresh server process per run; both: RSS as it stands ${SETTLE_MS} ms after the last connection, no GC forced` }),
        natsMissing
          ? failedRow(NATS.name, NATS.unit, NATS.baselineName, NATS.target, natsMissing)
          : makeRow({ ...NATS, baselineName: `nats-server ${natsVersion} over WebSocket`, ours, baseline: nats, lowerIsBetter: true, quick: budget.quick, note: `${total} idle connections, fresh server process per run; ratio = nats KiB/conn ÷ ours (higher is better); both: RSS as it stands ${SETTLE_MS} ms after the last connection, no GC forced; nats connections after CONNECT + PING/PONG` }),
        natsMissing
          ? failedRow(GATEWAY.name, GATEWAY.unit, GATEWAY.baselineName, GATEWAY.target, natsMissing)
          : makeRow({ ...GATEWAY, baselineName: `nats-server ${natsVersion} over WebSocket`, ours: origin, baseline: nats, lowerIsBetter: true, quick: budget.quick, note: `${total} idle connections through npm start's gateway port (gateway and realtime in one process: one socket per connection), a fresh npm start per run; read as the row above` }),
      ];
    }),
};
