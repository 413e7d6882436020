import { makeRow } from '../lib/result-schema';
import { sleep, withWorkers, type Scenario } from '../lib/scenario';
import { sideBySide } from '../lib/side-by-side';
import type { WorkerHandle } from '../lib/workers';

const ROW = { name: 'webhooks_fanout_ratio', unit: 'msgs/s', baselineName: 'same realtime, tenant without endpoints, default config', target: 0.95 };
/** #32: "the receiver hanging: fan-out throughput of other channels unchanged within 5%". */
const HANG_ROW = { name: 'webhooks_hang_fanout_ratio', unit: 'msgs/s', baselineName: 'same realtime, tenant without endpoints, default config', target: 0.95 };
const ALL_EVENTS = ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'user_connected', 'user_disconnected'];
const SUBSCRIBERS = 50;
const MESSAGE_BYTES = 100;
const WINDOW = 32;
const CHANNEL = 'bench-webhooks';
/**
 * One connect-subscribe-close every CHURN_MS on each side while it is
 * measured: 6 webhook events each on the measured side (`BENCH_WEBHOOKS_CHURN_MS`
 * sets another pace, to see how the cost grows with the events' rate).
 */
const CHURN_MS = Number(process.env.BENCH_WEBHOOKS_CHURN_MS) || 100;
const SLICES = 4;
const SLICE_WARMUP_MS = 300;

/**
 * Fan-out with webhooks in use (#32): a fresh realtime process recording
 * every event of a tenant whose endpoint wants all six and is a local
 * receiver answering 200 (the registry's sender delivering them while the
 * row runs), with connections coming and going beside the fan-out so events
 * flow; against the same process (default configuration) serving a tenant
 * without endpoints under the same load and churn: what a user without
 * webhooks runs (realtime keeps the counts for every tenant and records
 * nothing for that one). Measured like the usage row: slices in turns, 5
 * rounds.
 */
export const webhooks: Scenario = webhooksScenario(ROW, false);

/**
 * The same with the tenant's endpoint hanging (#32): it reads every request
 * and never answers, so each of the sender's requests waits out
 * WEBHOOK_TIMEOUT_MS and the events queue up and are retried, while the
 * tenant's fan-out on another channel is measured against no webhooks.
 */
export const webhooksHang: Scenario = webhooksScenario(HANG_ROW, true);

function webhooksScenario(ROW: typeof HANG_ROW, hang: boolean): Scenario {
  return {
    rows: [ROW],
    run: (ctx) =>
      withWorkers(async (spawn) => {
        const { budget, stack } = ctx;
        // BENCH_WEBHOOKS_AA=1: both sides without webhooks (no endpoint, the same default configuration), to read the row's noise floor.
        const AA = process.env.BENCH_WEBHOOKS_AA === '1';
        const started: WorkerHandle[] = [];
        try {
          // One realtime process serves both sides (#32 item 1: a tenant without endpoints has nothing recorded), so
          // what differs between them is the tenant's endpoint alone, not two processes' luck (JIT, heap, core).
          const rt = await stack.startRealtime('realtime-webhooks');
          started.push(rt.worker);
          const receiver = await spawn('webhook-receiver', { label: 'webhook-receiver' });
          const { url } = await receiver.call<{ url: string }>('start', { hang });
          const keys = { on: await stack.createTenant(), off: await stack.createTenant() } as const;
          if (!AA) {
            const created = await fetch(`${stack.registryHttp}/admin/tenants/${keys.on.tenantId}/webhooks`, {
              method: 'POST',
              headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
              body: JSON.stringify({ url, events: ALL_EVENTS }),
            });
            if (created.status !== 201) throw new Error(`creating the webhook endpoint answered ${created.status}: ${await created.text()}`);
          }
          // A tenant, a channel and subscribers per side; each side's publisher and churn run only in its own slices.
          const topicOf = (side: keyof typeof keys) => `tenants/${keys[side].tenantId}/channels/${CHANNEL}-${side}`;
          const sides = { on: rt, off: rt } as const;
          const [publisher, subscribers, churner] = await Promise.all([
            spawn('ws-clients', { label: 'publisher' }),
            spawn('ws-clients', { label: 'subscribers' }),
            spawn('ws-clients', { label: 'churn' }),
          ]);
          for (const group of ['on', 'off'] as const) {
            const opened = await subscribers.call<{ opened: number; firstError?: string }>('open', { group, variant: 'relay', base: sides[group].ws, count: SUBSCRIBERS, concurrency: 10, level: 'subscribed', topic: topicOf(group), key: keys[group] });
            if (opened.opened < SUBSCRIBERS) throw new Error(`${group}: only ${opened.opened} subscribers (${opened.firstError})`);
          }
          const churned = { on: 0, off: 0 };
          const start = async (side: keyof typeof sides) => {
            await churner.call('churnStart', { group: side, base: sides[side].ws, key: keys[side], channelPrefix: `presence:churn-${side}`, everyMs: CHURN_MS });
            await publisher.call('publishStart', { group: side, variant: 'relay', base: sides[side].ws, topic: topicOf(side), window: WINDOW, bytes: MESSAGE_BYTES, key: keys[side] });
          };
          const stop = async (side: keyof typeof sides) => {
            await publisher.call('publishStop', { group: side });
            const c = await churner.call<{ done: number; failed: number; firstError?: string }>('churnStop', { group: side });
            if (c.failed > 0) throw new Error(`${side}: ${c.failed} churned connections failed (${c.firstError})`);
            churned[side] += c.done;
          };
          for (const side of ['on', 'off'] as const) {
            await start(side);
            await sleep(Math.max(1, budget.warmupSeconds) * 1000);
            await stop(side);
          }
          const count = (group: string) => subscribers.call<{ delivered: number; atMs: number }>('count', { group });
          const { figures, limited } = await sideBySide(
            {
              on: { start: () => start('on'), stop: () => stop('on'), count: () => count('on'), cpu: [rt.worker, subscribers, publisher, churner, stack.workers.registry, receiver] },
              off: { start: () => start('off'), stop: () => stop('off'), count: () => count('off'), cpu: [rt.worker, subscribers, publisher, churner, stack.workers.registry] },
            },
            ['on', 'off'],
            { rounds: Math.max(2, budget.httpRuns), slices: budget.quick ? 2 : SLICES, sliceMs: (budget.seconds * 1000) / SLICES, sliceWarmupMs: SLICE_WARMUP_MS },
            (round, f) => ctx.log(`${ROW.name}: round ${round + 1}: ratio ${(f.on.at(-1)! / f.off.at(-1)!).toFixed(3)}${AA ? ' (A/A: both sides without endpoints)' : ''}`),
          );
          // Events flowed: the receiver got (nearly) every churned connection's six, less the last sender batch still on its way.
          const received = await receiver.call<{ requests: number; events: number }>('count');
          if (!AA && !hang && received.events < churned.on) throw new Error(`webhook events did not flow: ${received.events} received for ${churned.on} churned connections`);
          if (!AA && hang && received.requests === 0) throw new Error('the hanging endpoint was never called: no events flowed');
          const note = `${SUBSCRIBERS} subscribers, ${MESSAGE_BYTES}-byte data, window ${WINDOW}; a connection connects, subscribes and closes every ${CHURN_MS} ms on both sides (${churned.on} and ${churned.off}); the receiver ${hang ? 'hung on' : 'got'} ${received.events} events in ${received.requests} requests`;
          return [makeRow({ ...ROW, ours: figures.on, baseline: figures.off, quick: budget.quick, limitedBy: limited.on, baselineLimitedBy: limited.off, note })];
        } finally {
          await Promise.all(started.map((w) => w.stop(5000)));
        }
      }),
  };
}
