import type { Clock } from '../clock';
import type { Logger } from '../logger';
import type { Redis } from '../redis';
import { MemoryRateLimiter } from './memory-rate-limiter';
import type { RateLimiter } from './rate-limiter';
import { RedisRateLimiter } from './redis-rate-limiter';

export interface RateLimiterOptions {
  limit: number;
  windowMs: number;
  clock: Clock;
  logger: Logger;
  /** Shared across replicas when given; the in-process limiter otherwise and as its fallback. */
  redis?: Redis;
  prefix?: string;
}

/** Picks the driver: Redis (with the in-process one as its fallback) when given, else in-process. */
export function createRateLimiter(opts: RateLimiterOptions): RateLimiter {
  const memory = new MemoryRateLimiter({ limit: opts.limit, windowMs: opts.windowMs, clock: opts.clock });
  if (!opts.redis) return memory;
  return new RedisRateLimiter({
    redis: opts.redis,
    keyPrefix: `${opts.prefix ?? 'relay:'}ratelimit:`,
    limit: opts.limit,
    windowMs: opts.windowMs,
    fallback: memory,
    logger: opts.logger,
  });
}
