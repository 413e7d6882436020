import type { Clock, Logger, Redis } from '@service-relay/core';
import { MemoryRateLimiter } from './memory-rate-limiter';
import { RedisRateLimiter } from './redis-rate-limiter';

export interface RateDecision {
  allowed: boolean;
  /** Whole seconds until the window resets (at least 1); for Retry-After. */
  retryAfterS: number;
}

/** Counts hits per key in fixed windows. */
export interface RateLimiter {
  hit(key: string): Promise<RateDecision>;
}

export interface RateLimiterOptions {
  limit: number;
  windowMs: number;
  clock: Clock;
  logger: Logger;
  /** Shared across replicas when given; the in-process limiter otherwise and as its fallback. */
  redis?: Redis;
  prefix?: string;
}

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
