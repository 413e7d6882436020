import { randomUUID } from 'node:crypto';
import { createLogger } from '@service-relay/core';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Message } from '../../services/realtime/src/messaging/message';
import { RedisMessageBus } from '../../services/realtime/src/messaging/redis-message-bus';
import { eventually } from '../faults/support/probes';
import { PrivateRedisCluster } from './support/redis-cluster';

const logger = createLogger({ service: 'ha-cluster-sub', level: 'silent' });

/** The node holding a subscribed `ioredis-cluster(subscriber…)` connection of the message bus. */
async function subscriberNode(cluster: PrivateRedisCluster, dead?: number): Promise<number[]> {
  const found: number[] = [];
  for (const port of cluster.ports.filter((p) => p !== dead)) {
    const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => null });
    r.on('error', () => {});
    try {
      const list = (await r.client('LIST')) as string;
      if (list.split('\n').some((l) => l.includes('name=ioredis-cluster(subscriber') && / sub=[1-9]/.test(l))) found.push(port);
    } finally {
      r.disconnect();
    }
  }
  return found;
}

// A realtime process's live subscriptions sit on one Cluster node. When that
// node dies, ioredis moves them to another node by itself; the message bus
// must then refill from the stream what was published in between, or its
// listeners miss acknowledged messages without being told.
describe('Redis Cluster: the node carrying the subscriptions is SIGKILLed', () => {
  let cluster: PrivateRedisCluster;
  const buses: RedisMessageBus[] = [];
  const closers: Array<() => Promise<void>> = [];
  const killed: number[] = [];
  beforeAll(async () => {
    // The other masters keep serving their slots while one is down (no replicas here).
    cluster = await PrivateRedisCluster.start(3, ['--cluster-require-full-coverage', 'no']);
  });
  afterAll(async () => {
    await Promise.all([...buses.map((b) => b.close()), ...closers.map((c) => c())]);
    await cluster?.stop();
  });

  it('every message acknowledged on a surviving node reaches the listener, in order, after the subscription moved', async () => {
    const prefix = `ha:sub:${randomUUID().slice(0, 8)}:`;
    const retention = { maxMessages: 1000, ttlS: 60 };
    const publisher = new RedisMessageBus(cluster.url, prefix, retention, logger);
    const subscriber = new RedisMessageBus(cluster.url, prefix, retention, logger);
    buses.push(publisher, subscriber);
    const tenantId = randomUUID();
    const got: Message[] = [];
    // Subscribe on a throwaway channel first, to learn which node carries the subscriptions.
    await subscriber.subscribe({ tenantId, channel: 'probe' }, () => {});
    const [subNode] = await eventually('the subscriber connection shows on one node', async () => {
      const nodes = await subscriberNode(cluster);
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
    killed.push(subNode!);
    const ackedAtKill = acked.length;
    await eventually('publishes go on after the kill', async () => acked.length >= ackedAtKill + 50, 20_000, 20);
    stop = true;
    await loop;
    const movedTo = await eventually('the subscriptions moved to a surviving node', async () => {
      const nodes = await subscriberNode(cluster, subNode);
      return nodes.length === 1 ? nodes[0] : undefined;
    }, 10_000);
    expect(movedTo).not.toBe(subNode);
    const want = new Set(acked);
    await eventually(`every acknowledged message delivered (${acked.length})`, async () => got.filter((m) => want.has(m.id)).length === want.size, 15_000, 50);
    const ids = got.map((m) => m.id);
    expect(new Set(ids).size, 'no message delivered twice').toBe(ids.length);
    expect(ids).toEqual(acked);
    await Promise.all([publisher.close(), subscriber.close()]);
    console.log(`[ha] cluster: subscriber node ${subNode} SIGKILLed; subscriptions moved to ${movedTo}; ${acked.length} acknowledged (${acked.length - ackedAtKill} after the kill), all delivered in order, ${Date.now() - killedAt} ms from the kill to the check`);
  });
});
