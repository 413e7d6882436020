import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLogger } from '@service-relay/core';
import { TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { describeMessageBusContract } from './message-bus-contract';
import { RedisMessageBus } from './redis-message-bus';

const logger = createLogger({ service: 'realtime-test', level: 'silent' });

describeMessageBusContract('redis', async (maxMessages) => {
  const prefix = uniqueRedisPrefix('rt');
  const retention = { maxMessages, ttlS: 60 };
  return [new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger), new RedisMessageBus(TEST_REDIS_URL, prefix, retention, logger)];
});

describe('RedisMessageBus', () => {
  it('sets the idle expiry on the channel stream', async () => {
    const prefix = uniqueRedisPrefix('rt');
    const bus = new RedisMessageBus(TEST_REDIS_URL, prefix, { maxMessages: 10, ttlS: 120 }, logger);
    const ref = { tenantId: '00000000-0000-4000-8000-000000000001', channel: 'c' };
    await bus.publish(ref, 'u', '1');
    const probe = new Redis(TEST_REDIS_URL);
    const ttl = await probe.ttl(`${prefix}ch:${ref.tenantId}:c`);
    expect(ttl).toBeGreaterThan(100);
    expect(ttl).toBeLessThanOrEqual(120);
    await bus.close();
    probe.disconnect();
  });
});
