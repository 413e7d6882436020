import { startPeer } from '../lib/peers';
import { failedRow, makeRow, type Row } from '../lib/result-schema';
import { rotate, sleep, withWorkers, type BenchContext, type Scenario } from '../lib/scenario';
import type { TenantKey } from '../lib/tokens';
import { watchCpu, type StartOptions, type WorkerHandle } from '../lib/workers';
import type { Variant } from '../lib/ws-protocols';

/** Messages per second the publisher sends, paced (not saturating). */
const RATE = 200;
const MESSAGE_BYTES = 100;
const CLIENT_PROCESSES = 2;
/** Every n-th subscriber reads the send stamps; the others only count, so the clients cost every server alike and little. */
const SAMPLE_EVERY = 10;
/** Rounds of a full run: a row is met in 4 of 5. */
const FULL_ROUNDS = 5;

/** One server measured: a WebSocket endpoint the client processes speak `variant` to. */
export interface LatencyTarget {
  /** Names the target in rows and logs (`relay`, `nats`, ...). */
  name: string;
  variant: Variant;
  base: string;
  /** The process whose CPU `limited_by` reports (more may be added). */
  server: WorkerHandle;
  extraCpu?: WorkerHandle[];
  key?: TenantKey;
  topic: string;
}

/** One row: `ours` against `baseline`, both target names, compared on one percentile per round. */
export interface LatencyRowSpec {
  name: string;
  unit: string;
  baselineName: string;
  target: number;
  ours: string;
  baseline: string;
}

/** One target's figures in one round. */
export interface LatencyRound {
  p50: number;
  p99: number;
  p999: number;
  max: number;
  samples: number;
  deliveredPerS: number;
  /** Worst p99 event-loop delay of the client processes (ms): a harness that cannot keep up shows here. */
  clientLoopP99: number;
  /** Subscribers still open at the end of the round. */
  open: number;
  busiest: string;
}

const UNIT = 'ms p99';
const P99_VS_NATS: LatencyRowSpec = { name: 'latency_p99_vs_nats', unit: UNIT, baselineName: 'nats-server over WebSocket', target: 1.0, ours: 'relay', baseline: 'nats' };
/** #34 item 1: the same through the one origin a README user connects to (`npm start`'s gateway port). */
const GATEWAY_P99_VS_NATS: LatencyRowSpec = { name: 'gateway_latency_p99_vs_nats', unit: UNIT, baselineName: 'nats-server over WebSocket', target: 1.0, ours: 'origin', baseline: 'nats' };

function percentileOfSorted(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1]!;
}

/**
 * Measures every target in turns (the order rotated per round): the
 * subscribers of all targets are opened first and stay open; per round and
 * target a publisher sends `RATE` stamped messages a second for a warm-up,
 * then `seconds` are measured. Returns each target's rounds.
 */
export async function measureLatency(
  ctx: BenchContext,
  spawn: (name: string, opts?: StartOptions) => Promise<WorkerHandle>,
  targets: readonly LatencyTarget[],
  rounds: number,
): Promise<{ rounds: Record<string, LatencyRound[]>; subscribers: number }> {
  const { budget } = ctx;
  const [publisher, ...clients] = await Promise.all([
    spawn('ws-clients', { label: 'publisher' }),
    ...Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('ws-clients', { label: `subscribers-${i + 1}` })),
  ]);
  const per = Math.ceil(budget.subscribers / CLIENT_PROCESSES);
  for (const t of targets) {
    const opened = await Promise.all(
      clients.map((c) => c.call<{ opened: number; firstError?: string }>('open', { group: t.name, variant: t.variant, base: t.base, count: per, concurrency: 25, level: 'subscribed', topic: t.topic, key: t.key, sampleEvery: SAMPLE_EVERY })),
    );
    const total = opened.reduce((s, o) => s + o.opened, 0);
    if (total < per * CLIENT_PROCESSES) throw new Error(`${t.name}: only ${total} subscribers connected (${opened.find((o) => o.firstError)?.firstError})`);
  }
  const out: Record<string, LatencyRound[]> = Object.fromEntries(targets.map((t) => [t.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const t of rotate(targets, round)) {
      await publisher.call('paceStart', { group: t.name, variant: t.variant, base: t.base, topic: t.topic, rate: RATE, bytes: MESSAGE_BYTES, key: t.key });
      await sleep((round === 0 ? budget.warmupSeconds : 1) * 1000);
      await Promise.all(clients.map((c) => c.call('latencyReset', { group: t.name })));
      const cpu = await watchCpu([t.server, ...(t.extraCpu ?? []), ...clients, publisher]);
      const before = await Promise.all(clients.map((c) => c.call<{ delivered: number; atMs: number }>('count', { group: t.name })));
      await sleep(budget.seconds * 1000);
      const after = await Promise.all(clients.map((c) => c.call<{ delivered: number; atMs: number; open: number }>('count', { group: t.name })));
      const taken = await Promise.all(clients.map((c) => c.call<{ samples: number[]; loopDelayP99Ms: number }>('latencyTake', { group: t.name })));
      const busiest = await cpu();
      await publisher.call('paceStop', { group: t.name });
      const sorted = Float64Array.from(taken.flatMap((x) => x.samples)).sort();
      const deliveredPerS = after.reduce((sum, a, i) => sum + ((a.delivered - before[i]!.delivered) / (a.atMs - before[i]!.atMs)) * 1000, 0);
      const r: LatencyRound = {
        p50: percentileOfSorted(sorted, 50),
        p99: percentileOfSorted(sorted, 99),
        p999: percentileOfSorted(sorted, 99.9),
        max: sorted.length > 0 ? sorted[sorted.length - 1]! : NaN,
        samples: sorted.length,
        deliveredPerS,
        clientLoopP99: Math.max(...taken.map((x) => x.loopDelayP99Ms)),
        open: after.reduce((sum, a) => sum + a.open, 0),
        busiest,
      };
      out[t.name]!.push(r);
      ctx.log(`latency round ${round + 1} ${t.name}: p50 ${r.p50.toFixed(2)} p99 ${r.p99.toFixed(2)} p99.9 ${r.p999.toFixed(2)} max ${r.max.toFixed(1)} ms, ${r.samples} samples, ${Math.round(deliveredPerS)} deliveries/s, client loop p99 ${r.clientLoopP99.toFixed(1)} ms, ${r.open} open; ${busiest}`);
    }
  }
  return { rounds: out, subscribers: per * CLIENT_PROCESSES };
}

const fmt = (xs: number[]) => xs.map((x) => x.toFixed(1)).join('/');

/** A row comparing two targets' p99 per round (lower is better), the p50s and more in its note. */
export function latencyRow(spec: LatencyRowSpec, measured: Record<string, LatencyRound[]>, quick: boolean, subscribers: number): Row {
  const ours = measured[spec.ours]!;
  const base = measured[spec.baseline]!;
  const note = [
    `${RATE} msg/s to ${subscribers} subscribers (${(RATE * subscribers) / 1000}k deliveries/s), ${MESSAGE_BYTES}-byte messages, every ${SAMPLE_EVERY}th subscriber sampled`,
    `p50 ms per round ${spec.ours} ${fmt(ours.map((r) => r.p50))} vs ${spec.baseline} ${fmt(base.map((r) => r.p50))}`,
    `p99.9 ${fmt(ours.map((r) => r.p999))} vs ${fmt(base.map((r) => r.p999))}`,
    `max ${fmt(ours.map((r) => r.max))} vs ${fmt(base.map((r) => r.max))}`,
    `client loop delay p99 ≤ ${Math.max(...ours.map((r) => r.clientLoopP99), ...base.map((r) => r.clientLoopP99)).toFixed(1)} ms`,
    ...[spec.ours, spec.baseline].flatMap((name) => {
      const open = Math.min(...measured[name]!.map((r) => r.open));
      return open < subscribers ? [`${name} lost ${subscribers - open} subscribers`] : [];
    }),
  ].join('; ');
  return makeRow({
    name: spec.name,
    unit: spec.unit,
    baselineName: spec.baselineName,
    target: spec.target,
    ours: ours.map((r) => r.p99),
    baseline: base.map((r) => r.p99),
    lowerIsBetter: true,
    quick,
    limitedBy: ours.at(-1)?.busiest,
    baselineLimitedBy: base.at(-1)?.busiest,
    note,
  });
}

/**
 * Latency under load (issue #34 item 3): one publisher sends 200 stamped
 * 100-byte messages a second to a channel with 1000 subscribers in two
 * client processes; the send→delivery latency of every sampled delivery is
 * collected and each round's p50 and p99 compared. Ours is realtime directly
 * with the client SDK's compact batch frames (`?batch=2`); the peer is
 * nats-server over WebSocket on the same clients.
 */
export const latency: Scenario = {
  rows: [P99_VS_NATS, GATEWAY_P99_VS_NATS],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack } = ctx;
      const nats = await startPeer(spawn, 'nats');
      if (typeof nats === 'string') return [P99_VS_NATS, GATEWAY_P99_VS_NATS].map((r) => failedRow(r.name, UNIT, r.baselineName, r.target, nats));
      const origin = await stack.oneOrigin();
      const targets: LatencyTarget[] = [
        { name: 'relay', variant: 'relay', base: stack.realtimeWs, server: stack.workers.realtime, key: stack.key, topic: `tenants/${stack.key.tenantId}/channels/bench-latency` },
        { name: 'origin', variant: 'relay', base: origin.gatewayWs, server: origin.host, key: origin.key, topic: `tenants/${origin.key.tenantId}/channels/bench-latency` },
        { name: 'nats', variant: 'nats', base: nats.base, server: nats.worker, topic: 'bench/latency' },
      ];
      const measured = await measureLatency(ctx, spawn, targets, budget.quick ? 1 : FULL_ROUNDS);
      const baselineName = `nats-server ${nats.version} over WebSocket`;
      return [P99_VS_NATS, GATEWAY_P99_VS_NATS].map((spec) => latencyRow({ ...spec, baselineName }, measured.rounds, budget.quick, measured.subscribers));
    }),
};
