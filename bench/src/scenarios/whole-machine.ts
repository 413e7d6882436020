import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { createRedis, redisReady } from '@service-relay/core';
import { startPeer } from '../lib/peers';
import { failedRow, makeRow } from '../lib/result-schema';
import { rotate, sleep, withWorkers, type Scenario } from '../lib/scenario';
import { processUsage } from '../lib/worker-runtime';
import { cpuShare, watchCpu, type WorkerHandle } from '../lib/workers';
import type { TenantKey } from '../lib/tokens';

const ROW = { name: 'whole_machine_fanout_vs_nats', unit: 'msgs/s', baselineName: 'nats-server over WebSocket, every core', target: 1.0 };
const CLIENT_PROCESSES = 2;
const MESSAGE_BYTES = 100;
const WINDOW = 32;

interface Target {
  /** Where subscribers connect, spread evenly; the publisher takes the first. */
  bases: string[];
  variant: 'relay' | 'nats';
  servers: WorkerHandle[];
  topic: string;
  key?: TenantKey;
}

/** The Redis server's PID when it runs on this machine (INFO's process_id), to say what share of the time is Redis's. */
async function localRedisPid(url: string): Promise<number | undefined> {
  const redis = createRedis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redisReady(redis, 3000);
    const pid = Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]);
    return Number.isInteger(pid) && readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('redis') ? pid : undefined;
  } catch {
    return undefined;
  } finally {
    redis.disconnect();
  }
}

/**
 * #34 item 5: what an operator deploys on one machine. As many realtime
 * processes as the machine has cores, on one Redis (each its own instance,
 * as replicas behind a load balancer), 1000 subscribers of one channel spread
 * evenly over them, the publisher on the first: a message published on one
 * instance reaches the others through Redis. Against nats-server, which uses
 * every core itself (Go schedules on all of them), with the same clients on
 * the same machine. Both sides get the SDK's framing (batch frames on ours,
 * nats-server packs many MSGs per frame). The note says where the time went.
 */
export const wholeMachine: Scenario = {
  rows: [ROW],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget, stack, log } = ctx;
      const cores = availableParallelism();
      const extra = await Promise.all(Array.from({ length: cores - 1 }, (_, i) => stack.startRealtime(`realtime-${i + 2}`)));
      try {
        const nats = await startPeer(spawn, 'nats');
        if (typeof nats === 'string') return [failedRow(ROW.name, ROW.unit, ROW.baselineName, ROW.target, nats)];
        const [publisher, ...clients] = await Promise.all([
          spawn('ws-clients', { label: 'publisher' }),
          ...Array.from({ length: CLIENT_PROCESSES }, (_, i) => spawn('ws-clients', { label: `subscribers-${i + 1}` })),
        ]);
        const realtimes = [stack.workers.realtime, ...extra.map((r) => r.worker)];
        const targets: Target[] = [
          { variant: 'relay', bases: [stack.realtimeWs, ...extra.map((r) => r.ws)], servers: realtimes, topic: `tenants/${stack.key.tenantId}/channels/bench-machine`, key: stack.key },
          { variant: 'nats', bases: [nats.base], servers: [nats.worker], topic: 'bench/machine' },
        ];
        const per = Math.ceil(budget.subscribers / CLIENT_PROCESSES);
        for (const t of targets) {
          for (const [c, client] of clients.entries()) {
            // Each client process spreads its subscribers over every instance.
            const counts = t.bases.map((_, i) => Math.floor(per / t.bases.length) + (i < per % t.bases.length ? 1 : 0));
            for (const [i, base] of t.bases.entries()) {
              const o = await client.call<{ opened: number; firstError?: string }>('open', { group: t.variant, variant: t.variant, base, count: counts[i], concurrency: 25, level: 'subscribed', topic: t.topic, key: t.key });
              if (o.opened < counts[i]!) throw new Error(`${t.variant}: subscribers-${c + 1} opened ${o.opened} of ${counts[i]} on ${base} (${o.firstError})`);
            }
          }
        }
        const redisPid = await localRedisPid(stack.env.REDIS_URL!);
        const rounds = budget.quick ? 1 : 5;
        const figures: Record<Target['variant'], number[]> = { relay: [], nats: [] };
        const where: Record<Target['variant'], string> = { relay: '', nats: '' };
        for (let round = 0; round < rounds; round++) {
          for (const t of rotate(targets, round)) {
            await publisher.call('publishStart', { group: t.variant, variant: t.variant, base: t.bases[0], topic: t.topic, window: WINDOW, bytes: MESSAGE_BYTES, key: t.key });
            await sleep((round === 0 ? budget.warmupSeconds : 0.5) * 1000);
            const cpu = await watchCpu([...t.servers, ...clients, publisher]);
            const redisBefore = redisPid && t.variant === 'relay' ? processUsage(redisPid) : undefined;
            const before = await Promise.all(clients.map((c) => c.call<{ delivered: number; atMs: number }>('count', { group: t.variant })));
            await sleep(budget.seconds * 1000);
            const after = await Promise.all(clients.map((c) => c.call<{ delivered: number; atMs: number }>('count', { group: t.variant })));
            const busiest = await cpu();
            const redisShare = redisBefore !== undefined ? cpuShare(redisBefore, processUsage(redisPid!)) : undefined;
            await publisher.call('publishStop', { group: t.variant });
            figures[t.variant].push(after.reduce((sum, a, i) => sum + ((a.delivered - before[i]!.delivered) / (a.atMs - before[i]!.atMs)) * 1000, 0));
            where[t.variant] = redisShare === undefined ? busiest : `${busiest} (of which redis-server ${Math.round(redisShare * 100)}%)`;
          }
        }
        log(`whole machine: relay ${figures.relay.map((f) => Math.round(f)).join(', ')}; nats ${figures.nats.map((f) => Math.round(f)).join(', ')}`);
        const note = `${cores} realtime processes on one Redis, ${per * CLIENT_PROCESSES} subscribers spread over them, publisher on the first, ${MESSAGE_BYTES}-byte data, window ${WINDOW}; nats-server ${nats.version} alone (GOMAXPROCS = ${cores})`;
        return [makeRow({ ...ROW, ours: figures.relay, baseline: figures.nats, quick: budget.quick, limitedBy: where.relay, baselineLimitedBy: where.nats, note })];
      } finally {
        await Promise.all(extra.map((r) => r.worker.stop(5000)));
      }
    }),
};
