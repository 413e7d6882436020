import type { Logger } from '../logger';
import type { Redis } from '../redis';
import type { RateDecision, RateLimiter } from './rate-limiter';

// One atomic step: count the hit and start the window on the first one. The
// PTTL guard repairs a key left without expiry (it would never reset otherwise).
const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if count == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

export interface RedisRateLimiterOptions {
  redis: Redis;
  keyPrefix: string;
  limit: number;
  windowMs: number;
  /** Used while Redis cannot answer: limits stay per replica instead of failing open or erroring. */
  fallback: RateLimiter;
  logger: Logger;
}

type HitCommand = (key: string, windowMs: number) => Promise<[number, number]>;

/** Fixed-window counter shared by every replica through Redis. */
export class RedisRateLimiter implements RateLimiter {
  private readonly command: HitCommand;
  private degraded = false;

  constructor(private readonly opts: RedisRateLimiterOptions) {
    opts.redis.defineCommand('relayRateLimitHit', { numberOfKeys: 1, lua: HIT_SCRIPT });
    const redis = opts.redis as unknown as { relayRateLimitHit: HitCommand };
    this.command = (key, windowMs) => redis.relayRateLimitHit(key, windowMs);
  }

  async hit(key: string): Promise<RateDecision> {
    const { redis, keyPrefix, limit, windowMs, logger } = this.opts;
    if (redis.status !== 'ready') return this.fallBack(key);
    try {
      const [count, ttl] = await this.command(keyPrefix + key, windowMs);
      if (this.degraded) {
        this.degraded = false;
        logger.info('rate limiter back on redis');
      }
      return { allowed: count <= limit, retryAfterS: Math.max(1, Math.ceil(ttl / 1000)) };
    } catch (err) {
      logger.debug({ err: (err as Error).message }, 'rate limiter redis call failed');
      return this.fallBack(key);
    }
  }

  private fallBack(key: string): Promise<RateDecision> {
    if (!this.degraded) this.opts.logger.warn('rate limiter redis not ready; using the in-process limiter');
    this.degraded = true;
    return this.opts.fallback.hit(key);
  }
}
