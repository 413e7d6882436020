import { randomUUID } from 'node:crypto';
import { createLogger } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChannelRef, Message } from '../../services/realtime/src/messaging/message';
import type { HistoryPage } from '../../services/realtime/src/messaging/message-bus';
import { RedisMessageBus } from '../../services/realtime/src/messaging/redis-message-bus';
import { eventually } from '../faults/support/probes';
import { PrivateRedisCluster } from './support/redis-cluster';

const logger = createLogger({ service: 'ha-cluster-failover', level: 'silent' });
const retention = { maxMessages: 10_000, ttlS: 300 };

/**
 * Redis Cluster with a replica per master (#33 item 1): a master SIGKILLed
 * under publishing. Every acknowledged message is kept (each publish WAITs
 * for the slot's replica on the master's own connection), or, when no
 * replica confirmed it, the channel's epoch changes once its slot is served
 * by the promoted replica, so a client resuming from before is told
 * `recovered: false`: never a silent loss.
 */
describe('Redis Cluster with replicas: a master SIGKILLed under publishing', () => {
  let cluster: PrivateRedisCluster;
  const buses: RedisMessageBus[] = [];
  beforeAll(async () => {
    // Other masters keep serving their slots while one is down and its replica not yet promoted.
    cluster = await PrivateRedisCluster.start(3, ['--cluster-require-full-coverage', 'no'], 1);
  });
  afterAll(async () => {
    await Promise.all(buses.map((b) => b.close()));
    await cluster?.stop();
  });

  const newBus = (prefix = `ha:fo:${randomUUID().slice(0, 8)}:`) => {
    const bus = new RedisMessageBus(cluster.url, prefix, retention, logger);
    buses.push(bus);
    return bus;
  };
  const streamOf = (bus: RedisMessageBus, ref: ChannelRef) => `${(bus as unknown as { prefix: string }).prefix}ch:{${ref.tenantId}:${ref.channel}}`;

  /** A channel whose slot is served by a master not in `avoid`. */
  async function channelOn(bus: RedisMessageBus, avoid: number[]): Promise<{ ref: ChannelRef; nodes: number[] }> {
    const tenantId = randomUUID();
    for (let i = 0; i < 200; i++) {
      const ref = { tenantId, channel: `room-${i}` };
      const nodes = await cluster.slotNodes(streamOf(bus, ref));
      if (!avoid.includes(nodes[0]!) && nodes.length === 2) return { ref, nodes };
    }
    throw new Error('no channel found on another master');
  }

  /** Reads from `after` until the store answers (bounded): during a failover reads fail with unavailable. */
  async function resume(bus: RedisMessageBus, ref: ChannelRef, after: string, epoch: string): Promise<HistoryPage> {
    return eventually('a resume from before the failover is answered', async () => bus.history(ref, { after, epoch, limit: 10_000 }).catch(() => undefined), 20_000, 100);
  }

  const killed: number[] = [];

  it('with the replica in step: the replica is promoted, every acknowledged message is kept (recovered: true) and reaches a live listener in order', async () => {
    const bus = newBus();
    const { ref, nodes } = await channelOn(bus, killed);
    const [master, replica] = nodes as [number, number];
    // Another instance listening live: its sharded subscription sits on the master killed below, and moves to the promoted replica.
    const listener = newBus((bus as unknown as { prefix: string }).prefix);
    expect(listener.livePath).toBe('sharded');
    const live: Message[] = [];
    await listener.subscribe(ref, (m) => live.push(m));
    const first = await bus.publish(ref, 'u', '"0"');
    const epoch = await bus.epoch(ref);
    const acked: string[] = [];
    let stop = false;
    const loop = (async () => {
      for (let n = 1; n < 20_000 && !stop; n++) {
        const m = await bus.publish(ref, 'u', `"${n}"`, { idempotencyKey: randomUUID() }).catch(() => undefined);
        if (m) acked.push(m.id);
        else await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await eventually('traffic before the kill', async () => acked.length >= 50, 10_000, 10);
    const killedAt = Date.now();
    await cluster.kill(master);
    killed.push(master);
    const atKill = acked.length;
    const promoted = await eventually('the replica serves the slot', async () => ((await cluster.slotNodes(streamOf(bus, ref)))[0] === replica ? Date.now() - killedAt : undefined), 30_000, 50);
    const resumed = await eventually('publishes acknowledged after the kill', async () => (acked.length > atKill ? Date.now() - killedAt : undefined), 30_000, 20);
    await eventually('steady traffic on the promoted replica', async () => acked.length >= atKill + 50, 20_000, 20);
    stop = true;
    await loop;
    const page = await resume(bus, ref, first.id, epoch);
    const got = new Set(page.messages.map((m) => m.id));
    const missing = acked.filter((id) => !got.has(id));
    const want = [first.id, ...acked];
    const wanted = new Set(want);
    const liveAcked = () => live.filter((m) => wanted.has(m.id));
    await eventually(`every acknowledged message delivered live (${want.length})`, async () => liveAcked().length >= want.length, 15_000, 20).catch(() => undefined);
    const liveAt = Date.now() - killedAt;
    console.log(`[ha] cluster failover, replica in step: master ${master} SIGKILLed, replica ${replica} serving the slot ${promoted} ms after, first publish acknowledged again ${resumed} ms after; ${acked.length} acknowledged (${atKill} before the kill); resume recovered ${String(page.recovery?.recovered)}, ${missing.length} missing; the live listener (sharded) had ${liveAcked().length} of them ${liveAt} ms after the kill`);
    expect(page.recovery?.recovered, 'nothing acknowledged was lost, so the resume recovers').toBe(true);
    expect(missing, 'every acknowledged message is in the history').toEqual([]);
    // A publish that failed (its client told 503) may still have been stored and delivered: only the acknowledged ones are owed.
    expect(liveAcked().map((m) => m.id), 'the live listener got every acknowledged message, in order').toEqual(want);
    expect(live.every((m, i) => i === 0 || m.id !== live[i - 1]!.id), 'none twice').toBe(true);
  });

  it('with the replica behind (frozen while publishes were acknowledged): after the failover the channel has a new epoch and a resume from before is told recovered: false', async () => {
    const bus = newBus();
    const { ref, nodes } = await channelOn(bus, killed);
    const [master, replica] = nodes as [number, number];
    const before = await bus.publish(ref, 'u', '"confirmed"');
    const epoch = await bus.epoch(ref);
    // The replica stops reading: WAIT times out, and these are acknowledged unconfirmed.
    cluster.freeze(replica);
    const unconfirmed: string[] = [];
    try {
      for (let n = 0; n < 5; n++) unconfirmed.push((await bus.publish(ref, 'u', `"unconfirmed-${n}"`)).id);
      await cluster.kill(master);
      killed.push(master);
    } finally {
      cluster.resume(replica);
    }
    const killedAt = Date.now();
    await eventually('the replica serves the slot', async () => ((await cluster.slotNodes(streamOf(bus, ref)))[0] === replica || undefined), 30_000, 50);
    const promotedMs = Date.now() - killedAt;
    const page = await resume(bus, ref, before.id, epoch);
    const got = new Set(page.messages.map((m) => m.id));
    const kept = unconfirmed.filter((id) => got.has(id)).length;
    console.log(`[ha] cluster failover, replica behind: ${unconfirmed.length} publishes acknowledged unconfirmed, master ${master} SIGKILLed, replica ${replica} serving ${promotedMs} ms after; ${kept} of them on the promoted replica; resume from before: recovered ${String(page.recovery?.recovered)} (${String(page.recovery && !page.recovery.recovered ? page.recovery.reason : '')}), epoch ${page.epoch === epoch ? 'unchanged' : 'new'}`);
    expect(page.epoch, 'the channel starts a new epoch').not.toBe(epoch);
    expect(page.recovery, 'a resume from before the failover is told').toMatchObject({ recovered: false, reason: 'history_lost' });
    // And the channel goes on: a publish now is acknowledged and read back in the new epoch.
    const after = await eventually('a publish after the failover', async () => bus.publish(ref, 'u', '"after"').catch(() => undefined), 20_000, 100);
    const now = await bus.history(ref, { after: before.id, epoch: page.epoch, limit: 100 });
    expect(now.messages.map((m) => m.id)).toContain(after.id);
  });
});
