import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '@service-relay/core';
import { deleteRedisPrefix, freeLoopbackPort, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { describeMessageBusContract } from './message-bus-contract';
import { RedisMessageBus } from './redis-message-bus';

const logger = createLogger({ service: 'realtime-test', level: 'silent' });

describeMessageBusContract('redis', async (maxMessages) => {
  const prefix = uniqueRedisPrefix('rt');
  const retention = { maxMessages, ttlS: 60 };
  const pair = (): [RedisMessageBus, RedisMessageBus] => [new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger), new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger)];
  return {
    buses: pair(),
    // A Redis restart without persistence, for this prefix only: the shared server keeps everyone else's keys.
    async loseEverything() {
      await deleteRedisPrefix(prefix);
      return pair();
    },
  };
});

describe('RedisMessageBus', () => {
  const ref = { tenantId: '00000000-0000-4000-8000-000000000001', channel: 'c' };

  it('unsubscribes the channels left in one tick together, and keeps one joined again in that tick', async () => {
    const prefix = uniqueRedisPrefix('rt');
    const bus = new RedisMessageBus(TEST_REDIS_URL, prefix, { maxMessages: 10, ttlS: 60 }, logger);
    const probe = new Redis(TEST_REDIS_URL);
    const subscribed = async () => ((await probe.pubsub('CHANNELS', `${prefix}*`)) as string[]).length;
    const refs = Array.from({ length: 20 }, (_, i) => ({ tenantId: ref.tenantId, channel: `left-${i}` }));
    const stops = await Promise.all(refs.map((r) => bus.subscribe(r, () => {})));
    expect(await subscribed()).toBe(20);
    for (const stop of stops) stop();
    // The first channel is joined again before the tick ends: its messages must still arrive.
    const again: string[] = [];
    const joined = bus.subscribe(refs[0]!, (m) => again.push(m.dataJson));
    const deadline = Date.now() + 5000;
    while ((await subscribed()) !== 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await subscribed()).toBe(1);
    const stop = await joined;
    await bus.publish(refs[0]!, 'u', '"still here"');
    while (again.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(again).toEqual(['"still here"']);
    stop();
    await bus.close();
    probe.disconnect();
    await deleteRedisPrefix(prefix);
  });

  it('sets the idle expiry on the channel stream and its meta hash', async () => {
    const prefix = uniqueRedisPrefix('rt');
    const bus = new RedisMessageBus(TEST_REDIS_URL, prefix, { maxMessages: 10, ttlS: 120 }, logger);
    await bus.publish(ref, 'u', '1', { idempotencyKey: 'k' });
    const probe = new Redis(TEST_REDIS_URL);
    const stream = `${prefix}ch:{${ref.tenantId}:c}`;
    for (const key of [stream, `${stream}/meta`]) {
      const ttl = await probe.ttl(key);
      expect(ttl).toBeGreaterThan(100);
      expect(ttl).toBeLessThanOrEqual(120);
    }
    expect(await probe.pttl(`${stream}/idem/k`)).toBeGreaterThan(590_000);
    await bus.close();
    probe.disconnect();
    await deleteRedisPrefix(prefix);
  });

  it('says history_lost once the stream was deleted behind its back, as after a restart without persistence', async () => {
    const prefix = uniqueRedisPrefix('rt');
    const bus = new RedisMessageBus(TEST_REDIS_URL, prefix, { maxMessages: 10, ttlS: 120 }, logger);
    const m1 = await bus.publish(ref, 'u', '1');
    const epoch = await bus.epoch(ref);
    const probe = new Redis(TEST_REDIS_URL);
    await probe.del(`${prefix}ch:{${ref.tenantId}:c}`, `${prefix}ch:{${ref.tenantId}:c}/meta`);
    expect(await bus.history(ref, { after: m1.id, epoch, limit: 10 })).toEqual({ messages: [], epoch: '', recovery: { recovered: false, reason: 'history_lost' } });
    const m2 = await bus.publish(ref, 'u', '2');
    const page = await bus.history(ref, { after: m1.id, epoch, limit: 10 });
    expect(page.recovery).toEqual({ recovered: false, reason: 'history_lost' });
    expect(page.messages.map((m) => m.id)).toEqual([m2.id]);
    expect(page.epoch).not.toBe(epoch);
    await bus.close();
    probe.disconnect();
    await deleteRedisPrefix(prefix);
  });

  it('reports each error of its Redis connections (counted in relay_realtime_redis_errors_total)', async () => {
    // Nothing listens on a port just freed: both connections are refused.
    const url = `redis://127.0.0.1:${await freeLoopbackPort()}`;
    const seen = new Set<string>();
    const bus = new RedisMessageBus(url, uniqueRedisPrefix('rt'), { maxMessages: 10, ttlS: 60 }, logger, 600, (connection) => seen.add(connection));
    const deadline = Date.now() + 5000;
    while (seen.size < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect([...seen].sort()).toEqual(['commands', 'subscriber']);
    await bus.close();
  });

  it('gives a stream from before epochs one on its next publish, without claiming a loss', async () => {
    const prefix = uniqueRedisPrefix('rt');
    const bus = new RedisMessageBus(TEST_REDIS_URL, prefix, { maxMessages: 10, ttlS: 120 }, logger);
    const probe = new Redis(TEST_REDIS_URL);
    const old = await probe.xadd(`${prefix}ch:{${ref.tenantId}:c}`, '*', 'u', 'u', 'd', '"old"');
    expect((await bus.history(ref, { after: old!, limit: 10 })).recovery).toEqual({ recovered: true });
    await bus.publish(ref, 'u', '"new"');
    expect(await bus.epoch(ref)).not.toBe('');
    expect((await bus.history(ref, { after: old!, limit: 10 })).recovery).toEqual({ recovered: true });
    await bus.close();
    probe.disconnect();
    await deleteRedisPrefix(prefix);
  });

  describe('history generation: a Redis restart or failover that may have lost acknowledged messages', () => {
    const LOST = { recovered: false, reason: 'history_lost' };
    const retention = { maxMessages: 10, ttlS: 120 };

    /** Makes the marker name a server process that is gone, as a restore from a snapshot (or a failover) shows it to the next check. */
    async function anotherProcess(probe: Redis, prefix: string, fields: Record<string, string>): Promise<void> {
      await probe.hset(`${prefix}{history}:generation`, { run: 'a-redis-process-that-is-gone', ...fields });
    }

    it('changes every channel\'s epoch once, for every instance alike; retained messages are still served and a stale instance cannot move it back', async () => {
      const prefix = uniqueRedisPrefix('rt');
      const a = new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger);
      const m1 = await a.publish(ref, 'u', '1');
      const m2 = await a.publish(ref, 'u', '2');
      const epoch = await a.epoch(ref);
      const probe = new Redis(TEST_REDIS_URL);
      // Restarted from disk: the previous process had no fsync on every write.
      await anotherProcess(probe, prefix, { durable: '0' });
      const [b, c] = [new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger), new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger)];
      const [eb, ec] = await Promise.all([b.epoch(ref), c.epoch(ref)]);
      expect(eb).not.toBe(epoch);
      expect(ec).toBe(eb);
      expect(await probe.hget(`${prefix}{history}:generation`, 'gen')).toMatch(/^2\./);
      for (const b2 of [b, c]) {
        const page = await b2.history(ref, { after: m1.id, epoch, limit: 10 });
        expect(page).toMatchObject({ epoch: eb, recovery: LOST });
        expect(page.messages.map((m) => m.id)).toEqual([m2.id]);
        // Even at the last retained message, without naming the epoch: what came after it may be gone.
        expect((await b2.history(ref, { after: m2.id, limit: 10 })).recovery).toEqual(LOST);
      }
      const m3 = await b.publish(ref, 'u', '3');
      expect((await c.history(ref, { after: m3.id, epoch: eb, limit: 10 })).recovery).toEqual({ recovered: true });
      // `a` checked before the change and has not checked since: its publish stays in the new epoch.
      const m4 = await a.publish(ref, 'u', '4');
      expect(await c.epoch(ref)).toBe(eb);
      expect(await c.history(ref, { after: m3.id, epoch: eb, limit: 10 })).toMatchObject({ recovery: { recovered: true }, messages: [{ id: m4.id }] });
      await Promise.all([a.close(), b.close(), c.close()]);
      probe.disconnect();
      await deleteRedisPrefix(prefix);
    });

    it('keeps epochs after a failover to a replica that ran alongside the old master, not after a master that continues no known history', async () => {
      const prefix = uniqueRedisPrefix('rt');
      const a = new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger);
      const m1 = await a.publish(ref, 'u', '1');
      const epoch = await a.epoch(ref);
      const probe = new Redis(TEST_REDIS_URL);
      const info = String(await probe.info('replication'));
      const replid2 = /master_replid2:(\w+)/.exec(info)![1]!;
      // The old master's replication id is this server's secondary one, and it vouched long after this server started.
      await anotherProcess(probe, prefix, { durable: '0', replid: replid2, seen: String(Date.now() + 60_000) });
      const b = new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger);
      expect(await b.history(ref, { after: m1.id, epoch, limit: 10 })).toMatchObject({ epoch, recovery: { recovered: true } });
      // A new master whose replication history does not continue the old one's (restored from a file, or restarted from disk): loss assumed.
      await anotherProcess(probe, prefix, { durable: '0', replid: 'not-this-servers-history', seen: String(Date.now() + 60_000) });
      const c = new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger);
      expect((await c.history(ref, { after: m1.id, epoch, limit: 10 })).recovery).toEqual(LOST);
      await Promise.all([a.close(), b.close(), c.close()]);
      probe.disconnect();
      await deleteRedisPrefix(prefix);
    });

    it('keeps epochs on a first start against a Redis that holds channels from before generations', async () => {
      const prefix = uniqueRedisPrefix('rt');
      const a = new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger);
      const m1 = await a.publish(ref, 'u', '1');
      const epoch = await a.epoch(ref);
      const probe = new Redis(TEST_REDIS_URL);
      // As written by the previous release: no generation anywhere.
      await probe.del(`${prefix}{history}:generation`);
      await probe.hdel(`${prefix}ch:{${ref.tenantId}:c}/meta`, 'g');
      const b = new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger);
      expect(await b.history(ref, { after: m1.id, epoch, limit: 10 })).toMatchObject({ epoch, recovery: { recovered: true } });
      await b.publish(ref, 'u', '2');
      expect(await b.epoch(ref)).toBe(epoch);
      await Promise.all([a.close(), b.close()]);
      probe.disconnect();
      await deleteRedisPrefix(prefix);
    });
  });
});
