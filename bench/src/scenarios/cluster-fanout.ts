import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { makeRow } from '../lib/result-schema';
import { sleep, withWorkers, type Scenario } from '../lib/scenario';
import { sideBySide } from '../lib/side-by-side';
import { onHardExit, type WorkerHandle } from '../lib/workers';

const FANOUT = { name: 'cluster_fanout_ratio', unit: 'msgs/s', baselineName: 'same buses, REDIS_PUBSUB=plain (PUBLISH, copied over the cluster bus)', target: 0.95 };
const CPU = { name: 'cluster_redis_cpu_ratio', unit: 'redis-cpu-µs/msg', baselineName: 'same buses, REDIS_PUBSUB=plain', target: 1.1 };
const MASTERS = 3;
/** Channels per master: every master serves the same number of them. */
const CHANNELS_PER_MASTER = 8;
/** Buses subscribing every channel (each stands for a realtime instance), split over two processes. */
const SUBSCRIBERS_PER_PROCESS = 2;
const WINDOW = 64;
const MESSAGE_BYTES = 100;
const SLICES = 4;
const SLICE_WARMUP_MS = 300;

interface Ref {
  tenantId: string;
  channel: string;
}

/**
 * #33 item 1: sharded pub/sub on a Redis Cluster against plain PUBLISH. A
 * private three-master Cluster (redis-server processes of its own, no
 * replicas), realtime's own Redis message bus on both sides (the publish
 * script, its live message, the subscriber's parsing), without the
 * WebSocket side, which sharding does not change: four buses (two processes)
 * subscribe every one of 24 channels, 8 in slots of each master; a fifth
 * process publishes 100-byte messages round-robin over them, 64 in flight.
 * Plain: each PUBLISH is delivered by the node a bus's one subscriber
 * connection happens to sit on, after the cluster bus copied it to every
 * node. Sharded: SPUBLISH is delivered by the channel's own master, to one
 * connection per bus and master. Both sides measured in turns
 * (lib/side-by-side.ts), on their own key prefixes.
 */
export const clusterFanout: Scenario = {
  rows: [FANOUT, CPU],
  run: (ctx) =>
    withWorkers(async (spawn) => {
      const { budget } = ctx;
      // BENCH_CLUSTER_AA=1: both sides plain, to read the rows' noise floor (bench/README.md).
      const AA = process.env.BENCH_CLUSTER_AA === '1';
      const cluster = await spawn('redis-cluster', { label: 'redis-cluster' });
      const started: WorkerHandle[] = [cluster];
      let dropHook: () => unknown = () => undefined;
      try {
        const { ports, pids, dir, version } = await cluster.call<{ ports: number[]; pids: number[]; dir: string; version: string }>('start', { masters: MASTERS }, 60_000);
        // Should the host worker be killed first: only if those PIDs are still our servers (a PID can be reused; redis-server shows `redis-server 127.0.0.1:<port> [cluster]`).
        dropHook = onHardExit(() => {
          pids.forEach((pid, i) => {
            try {
              if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`127.0.0.1:${ports[i]}`)) process.kill(pid, 'SIGKILL');
            } catch {
              // already gone
            }
          });
          rmSync(dir, { recursive: true, force: true });
        });
        const url = `redis-cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`;
        const sides = { sharded: { pubsub: AA ? 'plain' : 'auto', prefix: `bench:cf:s:${randomUUID().slice(0, 6)}:` }, plain: { pubsub: 'plain', prefix: `bench:cf:p:${randomUUID().slice(0, 6)}:` } } as const;
        // The same channel names on both sides (their prefixes differ, and the prefix is outside the hash tag): the same slots.
        const tenantId = randomUUID();
        const candidates = Array.from({ length: 400 }, (_, i) => ({ tenantId, channel: `room-${i}` }));
        const owner = await cluster.call<number[]>('owners', { keys: candidates.map((r) => `{${r.tenantId}:${r.channel}}`) });
        const channels: Ref[] = ports.flatMap((port) => candidates.filter((_, i) => owner[i] === port).slice(0, CHANNELS_PER_MASTER));
        if (channels.length !== MASTERS * CHANNELS_PER_MASTER) throw new Error(`could not spread ${MASTERS * CHANNELS_PER_MASTER} channels over the masters`);
        const [subsA, subsB, publisher] = await Promise.all([spawn('bus-clients', { label: 'bus-subscribers-a' }), spawn('bus-clients', { label: 'bus-subscribers-b' }), spawn('bus-clients', { label: 'bus-publisher' })]);
        started.push(subsA, subsB, publisher);
        for (const [group, side] of Object.entries(sides)) {
          for (const subs of [subsA, subsB]) {
            const { livePath } = await subs.call<{ livePath: string }>('open', { group, url, prefix: side.prefix, pubsub: side.pubsub, channels, subscribers: SUBSCRIBERS_PER_PROCESS });
            if (livePath !== (group === 'sharded' && !AA ? 'sharded' : 'plain')) throw new Error(`${group}: the bus runs ${livePath}`);
          }
        }
        const start = (group: keyof typeof sides) => publisher.call('publishStart', { group, url, prefix: sides[group].prefix, pubsub: sides[group].pubsub, channels, window: WINDOW, bytes: MESSAGE_BYTES });
        const stop = (group: keyof typeof sides) => publisher.call('publishStop', { group });
        const count = async (group: keyof typeof sides) => {
          const [a, b, p, stats] = await Promise.all([
            subsA.call<{ delivered: number; atMs: number }>('count', { group }),
            subsB.call<{ delivered: number; atMs: number }>('count', { group }),
            publisher.call<{ published: number }>('count', { group }),
            cluster.call<Array<{ port: number; cpuUs: number; busPublishSent: number }>>('stats'),
          ]);
          const counters: Record<string, number> = { published: p.published, redisCpuUs: 0, busPublish: 0 };
          for (const s of stats) {
            counters.redisCpuUs! += s.cpuUs;
            counters.busPublish! += s.busPublishSent;
            counters[`cpu:${s.port}`] = s.cpuUs;
          }
          return { delivered: a.delivered + b.delivered, atMs: Math.max(a.atMs, b.atMs), counters };
        };
        for (const group of ['sharded', 'plain'] as const) {
          await start(group);
          await sleep(Math.max(1, budget.warmupSeconds) * 1000);
          await stop(group);
        }
        const cpu = [cluster, subsA, subsB, publisher];
        const { figures, limited, counters, delivered } = await sideBySide(
          {
            sharded: { start: () => start('sharded'), stop: () => stop('sharded'), count: () => count('sharded'), cpu },
            plain: { start: () => start('plain'), stop: () => stop('plain'), count: () => count('plain'), cpu },
          },
          ['sharded', 'plain'],
          { rounds: budget.quick ? 2 : 5, slices: SLICES, sliceMs: (budget.seconds * 1000) / SLICES, sliceWarmupMs: SLICE_WARMUP_MS },
          (round, f) => ctx.log(`cluster-fanout: round ${round + 1}: deliveries ${(f.sharded.at(-1)! / f.plain.at(-1)!).toFixed(3)}${AA ? ' (A/A: both sides plain)' : ''}`),
        );
        const perMsg = (k: 'sharded' | 'plain') => counters[k].map((c, i) => c.redisCpuUs! / delivered[k][i]!);
        const total = (k: 'sharded' | 'plain', name: string) => counters[k].reduce((s, c) => s + (c[name] ?? 0), 0);
        const busPerPublish = (k: 'sharded' | 'plain') => (total(k, 'busPublish') / Math.max(1, total(k, 'published'))).toFixed(2);
        const spread = (k: 'sharded' | 'plain') => ports.map((p) => `${Math.round((total(k, `cpu:${p}`) / Math.max(1, total(k, 'published'))) * 10) / 10}`).join('/');
        const fanout = SUBSCRIBERS_PER_PROCESS * 2;
        const note =
          `redis ${version}, ${MASTERS} masters, ${channels.length} channels (${CHANNELS_PER_MASTER} per master), ${fanout} subscribing buses in 2 processes, window ${WINDOW}, ${MESSAGE_BYTES}-byte data; ` +
          `cluster-bus publish messages per publish: sharded ${busPerPublish('sharded')}, plain ${busPerPublish('plain')}; ` +
          `redis CPU µs per publish by node (${ports.join('/')}): sharded ${spread('sharded')}, plain ${spread('plain')}`;
        return [
          makeRow({ ...FANOUT, ours: figures.sharded, baseline: figures.plain, quick: budget.quick, limitedBy: limited.sharded, baselineLimitedBy: limited.plain, note }),
          makeRow({ ...CPU, ours: perMsg('sharded'), baseline: perMsg('plain'), lowerIsBetter: true, quick: budget.quick, note: `Redis CPU (3 servers together) per delivered message; ${note}` }),
        ];
      } finally {
        // The buses first, then the servers (the host stops them as it exits).
        await Promise.all(started.slice(1).map((w) => w.stop(5000)));
        await cluster.stop(10_000);
        dropHook();
      }
    }),
};
