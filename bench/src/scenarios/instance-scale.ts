import { performance } from 'node:perf_hooks';
import { failedRow, makeRow, type Row } from '../lib/result-schema';
import { sleep, withWorkers, type Scenario } from '../lib/scenario';
import { percentile } from '../lib/stats';
import type { TenantKey } from '../lib/tokens';
import { cpuShare, type WorkerHandle } from '../lib/workers';
import { startEmbedded } from '../lib/embedded';

/**
 * Issue #15 item 3: one realtime instance filled to 19,000 authenticated
 * connections (the most a process may hold under this machine's 20,000
 * open-file limit), from 4 client processes over 4 loopback source
 * addresses; 380 channels of 50 subscribers, one message a second on each
 * from another process; then a tenant holding 10,000 of them is disabled.
 * Once as deployed (realtime alone in its process, Redis, separate verifier
 * and registry) and once on the embedded default (everything in one process).
 * Not in --quick: it takes about a minute per deployment.
 */
const CONNECTIONS = 19_000;
const PER_CHANNEL = 50;
const CHANNELS = CONNECTIONS / PER_CHANNEL; // 380
const TENANT_A_CHANNELS = 200; // 10,000 connections: the tenant that is disabled
const CLIENT_PROCESSES = 4;
const WARMUP_S = 2;
const MEASURE_S = 10;
const P99_BOUND_MS = 100;
const DISABLE_BOUND_MS = 1000;
/** Room for the publishers and the health of an instance above its 19,000 clients. */
const LIMITS = { MAX_CONNECTIONS: '19500', MAX_CONNECTIONS_PER_ADDRESS: '19500', MAX_CONNECTIONS_PER_TENANT: '19500' };

const rows = (label: string) =>
  [
    { name: `scale_delivery_p99_ms${label}`, unit: 'ms', baselineName: 'target p99 (100 ms)', target: 1 },
    { name: `scale_disable_10k_ms${label}`, unit: 'ms', baselineName: 'target (1 s)', target: 1 },
  ] as const;

interface Target {
  label: string;
  describe: string;
  ws: string;
  server: WorkerHandle;
  createTenant(): Promise<TenantKey>;
  admin(path: string): Promise<unknown>;
}

interface Opened {
  opened: number;
  failed: number;
  ms: number;
  firstError?: string;
}

const topicOf = (key: TenantKey, channel: number) => `tenants/${key.tenantId}/channels/room-${channel}`;

async function measure(target: Target, spawn: (name: string, opts?: { label?: string }) => Promise<WorkerHandle>, log: (m: string) => void): Promise<Row[]> {
  const [a, b] = [await target.createTenant(), await target.createTenant()];
  const channels = Array.from({ length: CHANNELS }, (_, c) => (c < TENANT_A_CHANNELS ? { key: a, topic: topicOf(a, c) } : { key: b, topic: topicOf(b, c - TENANT_A_CHANNELS) }));
  const clients = await Promise.all(Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('scale-clients', { label: `scale-clients-${i + 1}` })));
  const publisher = await spawn('scale-clients', { label: 'scale-publisher' });
  const perProcess = CHANNELS / CLIENT_PROCESSES; // 95 channels, 4,750 connections each

  // Connect: each client process takes a contiguous run of channels, from its own source address.
  const before = await target.server.usage();
  const t0 = performance.now();
  const opened = await Promise.all(
    clients.map((c, i) => {
      const mine = channels.slice(i * perProcess, (i + 1) * perProcess);
      const slices = [a, b]
        .map((key) => ({ key, topics: mine.filter((ch) => ch.key === key).map((ch) => ch.topic), perTopic: PER_CHANNEL }))
        .filter((s) => s.topics.length > 0);
      return c.call<Opened>('open', { base: target.ws, localAddress: `127.0.0.${i + 1}`, slices, concurrency: 50 }, 300_000);
    }),
  );
  const connectS = (performance.now() - t0) / 1000;
  const n = opened.reduce((s, o) => s + o.opened, 0);
  if (n < CONNECTIONS) throw new Error(`${target.label}: only ${n} of ${CONNECTIONS} connections opened (${opened.find((o) => o.firstError)?.firstError})`);
  await sleep(500);
  const after = await target.server.usage();
  const rssPerConnKiB = (after.rss - before.rss) / CONNECTIONS / 1024;
  log(`${target.label}: ${CONNECTIONS} connections in ${connectS.toFixed(1)} s, ${rssPerConnKiB.toFixed(1)} KiB RSS each`);

  // Publish: 380 messages/s (19,000 deliveries/s); measure after a warm-up.
  await publisher.call('publishStart', {
    base: target.ws,
    tenants: [a, b].map((key) => ({ key, topics: channels.filter((ch) => ch.key === key).map((ch) => ch.topic) })),
    maxSeconds: WARMUP_S + MEASURE_S + 5,
  });
  await sleep(WARMUP_S * 1000);
  await Promise.all(clients.map((c) => c.call('mark')));
  const cpuBefore = await target.server.usage();
  await sleep(MEASURE_S * 1000);
  const cpuAfter = await target.server.usage();
  const window = await Promise.all(clients.map((c) => c.call<{ latencies: number[]; delivered: number }>('stats')));
  const { sent, acked, errors } = await publisher.call<{ sent: number; acked: number; errors: number }>('publishStop');
  if (acked + errors < sent) throw new Error(`${target.label}: ${sent - acked - errors} of ${sent} publishes unanswered 5 s after the last`);
  // Every message realtime acknowledged must reach its 50 subscribers (bounded wait for the last ones in flight).
  const expected = acked * PER_CHANNEL;
  let deliveredTotal = 0;
  for (let i = 0; i < 100; i++) {
    deliveredTotal = (await Promise.all(clients.map((c) => c.call<{ deliveredTotal: number }>('stats')))).reduce((s, r) => s + r.deliveredTotal, 0);
    if (deliveredTotal >= expected) break;
    await sleep(50);
  }
  const latencies = window.flatMap((w) => w.latencies);
  const delivered = window.reduce((s, w) => s + w.delivered, 0);
  // Say what happened rather than failing on an empty percentile.
  if (latencies.length === 0) throw new Error(`${target.label}: no message delivered in the ${MEASURE_S} s window (${sent} published, ${acked} acknowledged, ${errors} refused)`);
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  const cpu = cpuShare(cpuBefore, cpuAfter);
  const cpuPerDeliveryUs = (cpu * MEASURE_S * 1e6) / Math.max(1, delivered);
  log(`${target.label}: ${delivered} deliveries in ${MEASURE_S} s, p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; ${deliveredTotal}/${expected} delivered; server CPU ${(cpu * 100).toFixed(0)}%`);
  if (errors > 0) throw new Error(`${target.label}: ${errors} publishes refused`);
  if (deliveredTotal !== expected) throw new Error(`${target.label}: ${deliveredTotal} of ${expected} deliveries arrived (a loss)`);

  // Disable the tenant holding 10,000 connections: time until its last one saw 4401.
  const d0 = performance.timeOrigin + performance.now();
  await target.admin(`/admin/tenants/${a.tenantId}/disable`);
  const answeredMs = performance.timeOrigin + performance.now() - d0;
  const closed = await Promise.all(
    clients.map((c) => c.call<{ total: number; closed: number; times: number[]; codes: Record<string, number>; othersOpen: number; others: number }>('awaitClosed', { tenantId: a.tenantId, timeoutMs: 15_000 })),
  );
  const totalA = closed.reduce((s, r) => s + r.total, 0);
  const closedA = closed.reduce((s, r) => s + r.closed, 0);
  const wrong = closed.flatMap((r) => Object.entries(r.codes)).filter(([code]) => code !== '4401');
  const othersOpen = closed.reduce((s, r) => s + r.othersOpen, 0);
  const others = closed.reduce((s, r) => s + r.others, 0);
  if (closedA < totalA) throw new Error(`${target.label}: ${totalA - closedA} of ${totalA} connections still open 15 s after disable`);
  if (wrong.length > 0) throw new Error(`${target.label}: closes with other codes than 4401: ${JSON.stringify(wrong)}`);
  if (othersOpen !== others) throw new Error(`${target.label}: ${others - othersOpen} of the other tenant's ${others} connections closed by the disable`);
  const closeTimes = closed.flatMap((r) => r.times).map((t) => t - d0);
  const disableMs = Math.max(...closeTimes);
  const firstCloseMs = Math.min(...closeTimes);
  log(`${target.label}: ${totalA} connections of the disabled tenant closed between ${firstCloseMs.toFixed(0)} and ${disableMs.toFixed(0)} ms (admin 200 after ${answeredMs.toFixed(0)} ms); the other ${others} still open`);
  await Promise.all([...clients, publisher].map((c) => c.call('closeAll', undefined, 60_000)));
  await Promise.all([...clients, publisher].map((c) => c.stop(3000)));

  const [latRow, disRow] = rows(target.label === 'redis' ? '' : '_embedded');
  const common = `${target.describe}; ${CONNECTIONS} connections (${CLIENT_PROCESSES} client processes, 127.0.0.1-${CLIENT_PROCESSES}) in ${connectS.toFixed(1)} s (${Math.round(CONNECTIONS / connectS)}/s), ${rssPerConnKiB.toFixed(1)} KiB RSS each`;
  return [
    makeRow({
      ...latRow,
      ours: [p99],
      baseline: [P99_BOUND_MS],
      lowerIsBetter: true,
      quick: false,
      note: `${common}; ${CHANNELS} channels x ${PER_CHANNEL}, 1 msg/s each: ${Math.round(delivered / MEASURE_S)} deliveries/s, p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, ${deliveredTotal}/${expected} delivered; server ${(cpu * 100).toFixed(0)}% of a core (${cpuPerDeliveryUs.toFixed(1)} us per delivery)`,
    }),
    makeRow({
      ...disRow,
      ours: [disableMs],
      baseline: [DISABLE_BOUND_MS],
      lowerIsBetter: true,
      quick: false,
      note: `${common}; disable of the tenant holding ${totalA}: admin 200 after ${answeredMs.toFixed(0)} ms, first 4401 seen after ${firstCloseMs.toFixed(0)} ms, last after ${disableMs.toFixed(0)} ms; the other tenant's ${others} stayed open`,
    }),
  ];
}

/** One deployment's rows; a deployment that fails reports its own rows as failed and leaves the other's standing. */
async function guarded(label: string, log: (m: string) => void, body: () => Promise<Row[]>): Promise<Row[]> {
  try {
    return await body();
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    log(`scale (${label}): FAILED: ${why}`);
    return rows(label === 'redis' ? '' : '_embedded').map((r) => failedRow(r.name, r.unit, r.baselineName, r.target, why));
  }
}

export const instanceScale: Scenario = {
  rows: [...rows(''), ...rows('_embedded')],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { stack, log } = ctx;
      const deployed = await guarded('redis', log, async () => {
        const rt = await stack.startRealtime('realtime-scale', [], LIMITS);
        try {
          const target: Target = {
            label: 'redis',
            describe: 'one realtime process on Redis, verifier and registry in their own',
            ws: rt.ws,
            server: rt.worker,
            createTenant: () => stack.createTenant(),
            admin: (path) => stack.admin(path),
          };
          return await measure(target, spawn, log);
        } finally {
          await rt.worker.stop(5000);
        }
      });

      // The embedded default, reached as a README user does: through the gateway's
      // port (the one origin), which hands each upgrade to realtime in its process.
      const embedded = await guarded('embedded', log, async () => {
        const one = await startEmbedded(spawn, 'embedded', LIMITS);
        try {
          const target: Target = {
            label: 'embedded',
            describe: 'the embedded default (`npm start`: every service in one process, in-process bus, PGlite), through the gateway port',
            ws: one.gatewayWs,
            server: one.host,
            createTenant: () => one.createTenant(),
            admin: (path) => one.admin(path),
          };
          return await measure(target, spawn, log);
        } finally {
          await one.stop();
        }
      });
      return [...deployed, ...embedded];
    }),
};
