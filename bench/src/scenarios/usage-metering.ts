import { makeRow } from '../lib/result-schema';
import { sleep, withWorkers, type Scenario } from '../lib/scenario';
import { sideBySide } from '../lib/side-by-side';
import type { WorkerHandle } from '../lib/workers';

const ROW = { name: 'usage_metering_ratio', unit: 'msgs/s', baselineName: 'same realtime, USAGE_METERING=false, tenant without limits of its own', target: 0.95 };
/** The tenant's own limits on the measured side (#30 item 1): every one set, none reached by the load. */
const TENANT_LIMITS = {
  max_connections: 1_000_000,
  publish_rate_per_s: 1_000_000,
  publish_burst: 1_000_000,
  connection_publish_rate_per_s: 1_000_000,
  connection_publish_burst: 1_000_000,
  max_subscriptions: 1000,
  max_presence_members: 10_000,
  history_max_messages: 1000,
  history_ttl_s: 86_400,
  max_message_bytes: 65_536,
};
const SUBSCRIBERS = 50;
const MESSAGE_BYTES = 100;
const WINDOW = 32;
const CHANNEL = 'bench-usage';
/**
 * Each round measures each side in this many slices, in turns (A B B A ...),
 * and sums them (lib/side-by-side.ts): with one 5-second turn a side, a shift
 * in the machine's load between the two turns moved a round's ratio by up to
 * 10% (0.91-1.04 on a quiet machine with no difference in code).
 */
const SLICES = 4;
const SLICE_WARMUP_MS = 300;

/**
 * Publish and fan-out throughput with usage metering on (every publish and
 * delivery counted per tenant, flushed to the registry every second) and a
 * tenant with limits of its own (#30: every limit set, from the registry,
 * the tenant publish rate reconciled on Redis), against the same realtime
 * code with metering off and a tenant on the environment's defaults: two
 * fresh realtime processes on the same Redis, verifier and registry, the same
 * publisher, window and subscribers, measured in turns (A B, B A, ...).
 */
export const usageMetering: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      // BENCH_USAGE_AA=1: both sides metering off with a tenant on the defaults, to read the row's noise floor (bench/README.md).
      const AA = process.env.BENCH_USAGE_AA === '1';
      const started: WorkerHandle[] = [];
      try {
        const on = await stack.startRealtime('realtime-usage-on', [], AA ? { USAGE_METERING: 'false' } : { USAGE_METERING: 'true', USAGE_FLUSH_INTERVAL_S: '1' });
        started.push(on.worker);
        const off = await stack.startRealtime('realtime-usage-off', [], { USAGE_METERING: 'false' });
        started.push(off.worker);
        const limitedTenant = await stack.createTenant();
        const set = await fetch(`${stack.registryHttp}/admin/tenants/${limitedTenant.tenantId}/limits`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ overrides: TENANT_LIMITS }),
        });
        if (set.status !== 200) throw new Error(`setting the tenant's limits answered ${set.status}: ${await set.text()}`);
        const keys = { on: AA ? await stack.createTenant() : limitedTenant, off: stack.key } as const;
        // A channel per side: on one channel, each side's publishes would also fan out on the other process (both on one Redis).
        const topicOf = (side: keyof typeof keys) => `tenants/${keys[side].tenantId}/channels/${CHANNEL}-${side}`;
        const sides = { on, off } as const;
        const [publisher, subscribers] = await Promise.all([spawn('ws-clients', { label: 'publisher' }), spawn('ws-clients', { label: 'subscribers' })]);
        for (const group of ['on', 'off'] as const) {
          const opened = await subscribers.call<{ opened: number; firstError?: string }>('open', { group, variant: 'relay', base: sides[group].ws, count: SUBSCRIBERS, concurrency: 10, level: 'subscribed', topic: topicOf(group), key: keys[group] });
          if (opened.opened < SUBSCRIBERS) throw new Error(`${group}: only ${opened.opened} subscribers (${opened.firstError})`);
        }
        const count = (group: string) => subscribers.call<{ delivered: number; atMs: number }>('count', { group });
        const start = (side: keyof typeof sides) => publisher.call('publishStart', { group: side, variant: 'relay', base: sides[side].ws, topic: topicOf(side), window: WINDOW, bytes: MESSAGE_BYTES, key: keys[side] });
        for (const side of ['on', 'off'] as const) {
          await start(side);
          await sleep(Math.max(1, budget.warmupSeconds) * 1000);
          await publisher.call('publishStop', { group: side });
        }
        const { figures, limited } = await sideBySide(
          {
            on: { start: () => start('on'), stop: () => publisher.call('publishStop', { group: 'on' }), count: () => count('on'), cpu: [on.worker, subscribers, publisher] },
            off: { start: () => start('off'), stop: () => publisher.call('publishStop', { group: 'off' }), count: () => count('off'), cpu: [off.worker, subscribers, publisher] },
          },
          ['on', 'off'],
          { rounds: Math.max(2, budget.httpRuns), slices: SLICES, sliceMs: (budget.seconds * 1000) / SLICES, sliceWarmupMs: SLICE_WARMUP_MS },
          (round, f) => ctx.log(`usage: round ${round + 1}: ratio ${(f.on.at(-1)! / f.off.at(-1)!).toFixed(3)}${AA ? ' (A/A: both sides off)' : ''}`),
        );
        const note = `${SUBSCRIBERS} subscribers, ${MESSAGE_BYTES}-byte data, window ${WINDOW}; metering flushes every 1 s; measured tenant with every limit of its own set`;
        return [makeRow({ ...ROW, ours: figures.on, baseline: figures.off, quick: budget.quick, limitedBy: limited.on, baselineLimitedBy: limited.off, note })];
      } finally {
        await Promise.all(started.map((w) => w.stop(5000)));
      }
    }),
};
