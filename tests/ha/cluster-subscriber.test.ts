import { randomUUID } from 'node:crypto';
import { createLogger } from '@service-relay/core';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelRef, Message } from '../../services/realtime/src/messaging/message';
import { RedisMessageBus, type RedisPubSub } from '../../services/realtime/src/messaging/redis-message-bus';
import { eventually } from '../faults/support/probes';
import { PrivateRedisCluster } from './support/redis-cluster';

const logger = createLogger({ service: 'ha-cluster-sub', level: 'silent' });
const retention = { maxMessages: 1000, ttlS: 60 };

/** Runs `f` on a short-lived connection to one node. */
async function onNode<T>(port: number, f: (r: Redis) => Promise<T>): Promise<T> {
  const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    return await f(r);
  } finally {
    r.disconnect();
  }
}

/** The nodes holding a subscribed connection of the message bus whose client name contains `kind`. */
async function subscribedNodes(cluster: PrivateRedisCluster, kind: 'subscriber' | 'ssubscriber', dead?: number): Promise<number[]> {
  const found: number[] = [];
  const flag = kind === 'subscriber' ? / sub=[1-9]/ : / ssub=[1-9]/;
  for (const port of cluster.ports.filter((p) => p !== dead)) {
    const list = await onNode(port, async (r) => (await r.client('LIST')) as string);
    if (list.split('\n').some((l) => l.includes(`name=ioredis-cluster(${kind}`) && flag.test(l))) found.push(port);
  }
  return found;
}

/** Publishes on `ref` one at a time, `pauseMs` apart, until stopped (bounded), collecting the acknowledged ids. */
function publishLoop(bus: RedisMessageBus, ref: ChannelRef, acked: string[], pauseMs = 5, idempotent = true): { stop(): Promise<void> } {
  let stop = false;
  const loop = (async () => {
    for (let n = 1; n < 20_000 && !stop; n++) {
      const m = await bus.publish(ref, 'u', `${n}`, idempotent ? { idempotencyKey: randomUUID() } : {}).catch(() => undefined);
      if (m) acked.push(m.id);
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  })();
  return {
    async stop() {
      stop = true;
      await loop;
    },
  };
}

let cluster: PrivateRedisCluster;
const buses: RedisMessageBus[] = [];
const newBus = (prefix: string, pubsub: RedisPubSub = 'auto') => {
  const bus = new RedisMessageBus(cluster.url, prefix, retention, logger, 600, () => {}, pubsub);
  buses.push(bus);
  return bus;
};
beforeAll(async () => {
  // The other masters keep serving their slots while one is down (no replicas here).
  cluster = await PrivateRedisCluster.start(3, ['--cluster-require-full-coverage', 'no']);
});
// Each test's buses go with it: the next one counts the subscriber connections on the nodes.
afterEach(async () => {
  await Promise.all(buses.splice(0).map((b) => b.close()));
});
afterAll(async () => {
  await cluster?.stop();
});

// #33 item 1: on a Cluster the live path is sharded pub/sub by default: a
// channel's live messages go by SPUBLISH to the master serving its stream's
// slot, and only there; each realtime process SSUBSCRIBEs on that master.
describe('Redis Cluster: sharded pub/sub (REDIS_PUBSUB=auto)', () => {
  it('subscribes each channel on the master serving its slot (PUBSUB SHARDCHANNELS there, no plain channel anywhere) and delivers', async () => {
    const prefix = `ha:shard:${randomUUID().slice(0, 8)}:`;
    const [publisher, subscriber] = [newBus(prefix), newBus(prefix)];
    expect(subscriber.livePath).toBe('sharded');
    const tenantId = randomUUID();
    // Channels until every master serves at least two of them (bounded).
    const byNode = new Map<number, ChannelRef[]>();
    for (let i = 0; i < 200 && [...byNode.values()].filter((r) => r.length >= 2).length < 3; i++) {
      const ref = { tenantId, channel: `room-${i}` };
      const node = await cluster.nodeOf(`${prefix}msg:{${tenantId}:${ref.channel}}`);
      byNode.set(node, [...(byNode.get(node) ?? []), ref]);
    }
    const refs = [...byNode.values()].flatMap((r) => r.slice(0, 2));
    expect(refs).toHaveLength(6);
    const got = new Map<string, Message[]>();
    for (const ref of refs) await subscriber.subscribe(ref, (m) => got.set(ref.channel, [...(got.get(ref.channel) ?? []), m]));
    for (const [node, list] of byNode) {
      const shard = await onNode(node, async (r) => ((await r.call('PUBSUB', 'SHARDCHANNELS', `${prefix}*`)) as string[]).sort());
      expect(shard, `the shard channels on ${node}`).toEqual(list.slice(0, 2).map((ref) => `${prefix}msg:{${tenantId}:${ref.channel}}`).sort());
    }
    for (const port of cluster.ports) expect(await onNode(port, (r) => r.pubsub('CHANNELS', `${prefix}*`)), `no plain channel on ${port}`).toEqual([]);
    expect((await subscribedNodes(cluster, 'ssubscriber')).sort(), 'one sharded subscriber connection on each master').toEqual([...cluster.ports].sort());
    const sent = await Promise.all(refs.map((ref) => publisher.publish(ref, 'u', '"hi"')));
    await eventually('every channel got its message', async () => refs.every((ref) => got.get(ref.channel)?.length === 1), 5000, 10);
    expect(refs.map((ref) => got.get(ref.channel)![0]!.id)).toEqual(sent.map((m) => m.id));
  });

  it('every acknowledged message reaches the listener, in order, after its sharded subscription connection was cut three times under publishing', async () => {
    const prefix = `ha:shard-cut:${randomUUID().slice(0, 8)}:`;
    const [publisher, subscriber] = [newBus(prefix), newBus(prefix)];
    const ref = { tenantId: randomUUID(), channel: 'room' };
    const node = await cluster.nodeOf(`${prefix}msg:{${ref.tenantId}:${ref.channel}}`);
    const got: Message[] = [];
    await subscriber.subscribe(ref, (m) => got.push(m));
    const acked: string[] = [];
    acked.push((await publisher.publish(ref, 'u', '0')).id);
    await eventually('the first message arrives live', async () => got.length === 1, 5000, 10);
    const loop = publishLoop(publisher, ref, acked);
    const started = Date.now();
    for (let cut = 0; cut < 3; cut++) {
      const before = acked.length;
      await eventually('traffic before the cut', async () => acked.length >= before + 20, 10_000, 5);
      // The subscriber's own connection only (CLIENT LIST: the sharded subscriber with a subscription), as a network cut would.
      const id = await onNode(node, async (r) => {
        const line = ((await r.client('LIST')) as string).split('\n').find((l) => l.includes('name=ioredis-cluster(ssubscriber') && / ssub=[1-9]/.test(l));
        return line && /^id=(\d+)/.exec(line)?.[1];
      });
      expect(id, 'the sharded subscription on its master').toBeDefined();
      expect(await onNode(node, (r) => r.client('KILL', 'ID', id!))).toBe(1);
      await eventually('subscribed again on the same master', async () => (await subscribedNodes(cluster, 'ssubscriber')).includes(node), 10_000, 20);
    }
    const atEnd = acked.length;
    await eventually('traffic after the last cut', async () => acked.length >= atEnd + 20, 10_000, 5);
    await loop.stop();
    const want = new Set(acked);
    await eventually(`every acknowledged message delivered (${acked.length})`, async () => got.filter((m) => want.has(m.id)).length === want.size, 15_000, 20);
    const ids = got.map((m) => m.id);
    expect(new Set(ids).size, 'no message delivered twice').toBe(ids.length);
    expect(ids).toEqual(acked);
    console.log(`[ha] cluster sharded: subscription to ${node} cut 3 times; ${acked.length} acknowledged, all delivered in order, ${Date.now() - started} ms`);
  });

  it("follows the channel's slot when it is resharded to another master under publishing: every acknowledged message arrives, in order", async () => {
    const prefix = `ha:shard-move:${randomUUID().slice(0, 8)}:`;
    const [publisher, subscriber] = [newBus(prefix), newBus(prefix)];
    const ref = { tenantId: randomUUID(), channel: 'room' };
    const name = `${prefix}msg:{${ref.tenantId}:${ref.channel}}`;
    const from = await cluster.nodeOf(name);
    const to = cluster.ports.find((p) => p !== from)!;
    const got: Message[] = [];
    await subscriber.subscribe(ref, (m) => got.push(m));
    const acked: string[] = [(await publisher.publish(ref, 'u', '0')).id];
    await eventually('the first message arrives live', async () => got.length === 1, 5000, 10);
    // Without idempotency keys: a new key in a migrating slot is refused (TRYAGAIN) until the slot changed hands.
    const loop = publishLoop(publisher, ref, acked, 5, false);
    const started = Date.now();
    await eventually('traffic before the move', async () => acked.length >= 20, 10_000, 5);
    // Publishes acknowledged by the new master while the slot migrates and the subscription is still on
    // the old one (a resharding's window, held open here): only the refill delivers them. Then the old
    // master drops the slot's subscriptions (an unsolicited SUNSUBSCRIBE): ioredis alone would not subscribe again.
    let inWindow = 0;
    await cluster.migrateSlot(name, to, async () => {
      const before = acked.length;
      await eventually('publishes acknowledged by the new master while migrating', async () => acked.length >= before + 5, 10_000, 5);
      inWindow = acked.length - before;
    });
    const atMove = acked.length;
    await eventually('traffic after the move', async () => acked.length >= atMove + 20, 10_000, 5);
    await loop.stop();
    const want = new Set(acked);
    await eventually(`every acknowledged message delivered (${acked.length})`, async () => got.filter((m) => want.has(m.id)).length === want.size, 15_000, 20);
    expect(got.map((m) => m.id)).toEqual(acked);
    expect(await onNode(to, (r) => r.call('PUBSUB', 'SHARDCHANNELS', `${prefix}*`)), 'subscribed on the new master').toEqual([name]);
    console.log(`[ha] cluster sharded: slot moved ${from} -> ${to} under publishing; ${acked.length} acknowledged (${inWindow} while the slot migrated, ${acked.length - atMove} after the move), all delivered in order, ${Date.now() - started} ms`);
  });

  it('across a rolling upgrade (REDIS_PUBSUB=both beside plain and auto instances), every instance gets every message once, in order', async () => {
    const prefix = `ha:shard-roll:${randomUUID().slice(0, 8)}:`;
    // old: a version before sharded pub/sub (plain names); both: this version during the roll; auto: after it.
    const buses = { old: newBus(prefix, 'plain'), both: newBus(prefix, 'both'), auto: newBus(prefix, 'auto') };
    const ref = { tenantId: randomUUID(), channel: 'room' };
    const got = { old: [] as string[], both: [] as string[], auto: [] as string[] };
    for (const k of ['old', 'both', 'auto'] as const) await buses[k].subscribe(ref, (m) => got[k].push(m.id));
    const sent: Record<string, string[]> = { old: [], both: [], auto: [] };
    for (let i = 0; i < 20; i++) for (const k of ['old', 'both', 'auto'] as const) sent[k]!.push((await buses[k].publish(ref, 'u', `"${k}-${i}"`)).id);
    const all = [...sent.old!, ...sent.both!, ...sent.auto!].sort(cmpId);
    // What each kind of instance hears: old ones what goes out plain (old and both publishers), auto ones what goes out sharded (both and auto).
    const want = { old: all.filter((id) => !sent.auto!.includes(id)), both: all, auto: all.filter((id) => !sent.old!.includes(id)) };
    await eventually('every instance got what reaches it', async () => (['old', 'both', 'auto'] as const).every((k) => got[k].length >= want[k].length), 5000, 10);
    expect(got).toEqual(want);
  });
});

function cmpId(a: string, b: string): number {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am - bm || as - bs;
}

// A realtime process's live subscriptions sit on one Cluster node. When that
// node dies, ioredis moves them to another node by itself; the message bus
// must then refill from the stream what was published in between, or its
// listeners miss acknowledged messages without being told.
describe('Redis Cluster, plain pub/sub (REDIS_PUBSUB=plain): the node carrying the subscriptions is SIGKILLed', () => {
  it('every message acknowledged on a surviving node reaches the listener, in order, after the subscription moved', async () => {
    const prefix = `ha:sub:${randomUUID().slice(0, 8)}:`;
    const publisher = newBus(prefix, 'plain');
    const subscriber = newBus(prefix, 'plain');
    expect(subscriber.livePath).toBe('plain');
    const tenantId = randomUUID();
    const got: Message[] = [];
    // Subscribe on a throwaway channel first, to learn which node carries the subscriptions.
    await subscriber.subscribe({ tenantId, channel: 'probe' }, () => {});
    const [subNode] = await eventually('the subscriber connection shows on one node', async () => {
      const nodes = await subscribedNodes(cluster, 'subscriber');
      return nodes.length === 1 ? nodes : undefined;
    }, 10_000);
    // A channel whose stream lives on another node: its publishes go on while the subscriber's node is down.
    let ref = { tenantId, channel: 'room-0' };
    for (let i = 0; i < 100 && (await cluster.nodeOf(`${prefix}ch:{${tenantId}:${ref.channel}}`)) === subNode; i++) ref = { tenantId, channel: `room-${i + 1}` };
    expect(await cluster.nodeOf(`${prefix}ch:{${tenantId}:${ref.channel}}`)).not.toBe(subNode);
    await subscriber.subscribe(ref, (m) => got.push(m));

    const acked: string[] = [];
    const first = await publisher.publish(ref, 'u', '0');
    acked.push(first.id);
    await eventually('the first message arrives live', async () => got.length === 1, 5000, 10);

    let stop = false;
    const loop = (async () => {
      for (let n = 1; n < 5000 && !stop; n++) {
        const m = await publisher.publish(ref, 'u', `${n}`, { idempotencyKey: randomUUID() }).catch(() => undefined);
        if (m) acked.push(m.id);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    await eventually('some traffic before the kill', async () => acked.length >= 20, 10_000, 10);
    const killedAt = Date.now();
    await cluster.kill(subNode!);
    const ackedAtKill = acked.length;
    await eventually('publishes go on after the kill', async () => acked.length >= ackedAtKill + 50, 20_000, 20);
    stop = true;
    await loop;
    const movedTo = await eventually('the subscriptions moved to a surviving node', async () => {
      const nodes = await subscribedNodes(cluster, 'subscriber', subNode);
      return nodes.length === 1 ? nodes[0] : undefined;
    }, 10_000);
    expect(movedTo).not.toBe(subNode);
    const want = new Set(acked);
    await eventually(`every acknowledged message delivered (${acked.length})`, async () => got.filter((m) => want.has(m.id)).length === want.size, 15_000, 50);
    const ids = got.map((m) => m.id);
    expect(new Set(ids).size, 'no message delivered twice').toBe(ids.length);
    expect(ids).toEqual(acked);
    console.log(`[ha] cluster: subscriber node ${subNode} SIGKILLed; subscriptions moved to ${movedTo}; ${acked.length} acknowledged (${acked.length - ackedAtKill} after the kill), all delivered in order, ${Date.now() - killedAt} ms from the kill to the check`);
  });
});
