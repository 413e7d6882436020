import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../clock';
import { createLogger } from '../logger';
import { createRedis, redisReady } from '../redis';
import { createRateLimiter } from './create-rate-limiter';

// core cannot depend on testkit (testkit depends on core): the same variable, read here.
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Two replicas' limiters on one Redis share their counts. */
describe('RedisRateLimiter', () => {
  const prefix = `test:${randomUUID()}:`;
  const logger = createLogger({ service: 't', level: 'silent' });
  const [ra, rb] = [createRedis(REDIS_URL), createRedis(REDIS_URL)];
  afterAll(async () => {
    const keys = await ra.keys(`${prefix}*`);
    if (keys.length) await ra.del(...keys);
    ra.disconnect();
    rb.disconnect();
  });

  it('shares one window across replicas, per key', async () => {
    const opts = { limit: 3, windowMs: 60_000, clock: new ManualClock(0), logger, prefix };
    const a = createRateLimiter({ ...opts, redis: ra });
    const b = createRateLimiter({ ...opts, redis: rb });
    await Promise.all([redisReady(ra), redisReady(rb)]);
    const seen = [];
    for (const l of [a, b, a, b]) seen.push((await l.hit('k')).allowed);
    expect(seen).toEqual([true, true, true, false]);
    const over = await a.hit('k');
    expect(over.allowed).toBe(false);
    expect(over.retryAfterS).toBeGreaterThan(0);
    expect((await b.hit('other')).allowed).toBe(true);
  });
});
