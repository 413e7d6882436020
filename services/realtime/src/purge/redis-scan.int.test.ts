import { createRedis, redisReady } from '@service-relay/core';
import { deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { globLiteral, unlinkMatching } from './redis-scan';

describe('unlinkMatching on Redis', () => {
  // Glob characters in the prefix must match only themselves.
  const prefix = `${uniqueRedisPrefix('purge')}[x]*?:`;
  const redis = createRedis(TEST_REDIS_URL);
  afterAll(async () => {
    await deleteRedisPrefix(prefix);
    redis.disconnect();
  });

  it("deletes exactly the tenant's keys of one family, across many SCAN pages, and nothing of another tenant or prefix", async () => {
    const A = '11111111-1111-4111-8111-111111111111';
    const B = '22222222-2222-4222-8222-222222222222';
    await redisReady(redis, 5000);
    const pipeline = redis.pipeline();
    for (let i = 0; i < 2500; i++) pipeline.set(`${prefix}ch:{${i % 2 === 0 ? A : B}:c${i}}`, '1');
    // B's channel named after A, and A under a look-alike prefix: neither matches.
    pipeline.set(`${prefix}ch:{${B}:${A}}`, '1');
    pipeline.set(`${prefix.replace('[x]', 'x')}ch:{${A}:c}`, '1');
    await pipeline.exec();
    const deleted = await unlinkMatching(redis, `${globLiteral(prefix)}ch:{${globLiteral(A)}:*`);
    expect(deleted).toBe(1250);
    const left = await redis.keys(`${globLiteral(prefix)}ch:{*`);
    expect(left.filter((k) => k.startsWith(`${prefix}ch:{${A}:`))).toEqual([]);
    expect(left).toHaveLength(1251);
    expect(await redis.exists(`${prefix.replace('[x]', 'x')}ch:{${A}:c}`)).toBe(1);
    await redis.del(`${prefix.replace('[x]', 'x')}ch:{${A}:c}`);
  });
});
