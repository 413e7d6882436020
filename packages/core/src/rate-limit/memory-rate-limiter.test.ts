import { describe, expect, it } from 'vitest';
import { ManualClock } from '../clock';
import { createLogger } from '../logger';
import { createRedis } from '../redis';
import { createRateLimiter } from './create-rate-limiter';
import { MemoryRateLimiter } from './memory-rate-limiter';

describe('MemoryRateLimiter', () => {
  it('allows `limit` hits per key per window and says when the window resets', async () => {
    const clock = new ManualClock(1_000_000);
    const limiter = new MemoryRateLimiter({ limit: 2, windowMs: 60_000, clock });
    expect(await limiter.hit('a')).toEqual({ allowed: true, retryAfterS: 60 });
    expect((await limiter.hit('a')).allowed).toBe(true);
    clock.advance(20_500);
    expect(await limiter.hit('a')).toEqual({ allowed: false, retryAfterS: 40 });
    expect((await limiter.hit('b')).allowed).toBe(true);
    clock.advance(39_500);
    expect((await limiter.hit('a')).allowed).toBe(true);
  });

  it('stays within its key bound', async () => {
    const clock = new ManualClock(0);
    const limiter = new MemoryRateLimiter({ limit: 1, windowMs: 1000, clock, maxKeys: 10 });
    for (let i = 0; i < 100; i++) await limiter.hit(`k${i}`);
    expect((limiter as unknown as { windows: Map<string, unknown> }).windows.size).toBeLessThanOrEqual(10);
  });
});

describe('RedisRateLimiter while Redis is unreachable', () => {
  it('falls back to the in-process limiter instead of failing open or throwing', async () => {
    const logger = createLogger({ service: 't', level: 'silent' });
    const redis = createRedis('redis://127.0.0.1:1', { retryStrategy: () => null });
    redis.on('error', () => {});
    try {
      const limiter = createRateLimiter({ limit: 2, windowMs: 60_000, clock: new ManualClock(0), logger, redis, prefix: 't:' });
      const results = [];
      for (let i = 0; i < 3; i++) results.push((await limiter.hit('k')).allowed);
      expect(results).toEqual([true, true, false]);
    } finally {
      redis.disconnect();
    }
  });
});
