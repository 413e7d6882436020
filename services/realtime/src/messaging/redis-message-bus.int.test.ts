import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '@service-relay/core';
import { deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
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
});
