import type { LRUCache } from 'lru-cache';
import type { Clock } from '../clock';
import { clockedLru } from '../lru';
import type { RateDecision, RateLimiter } from './rate-limiter';

interface Window {
  count: number;
  resetAt: number;
}

export interface MemoryRateLimiterOptions {
  limit: number;
  windowMs: number;
  clock: Clock;
  /** Keys tracked at once; beyond it the least recently hit is forgotten. */
  maxKeys?: number;
}

/** Fixed-window counter in this process: the default, and the fallback while Redis is down. */
export class MemoryRateLimiter implements RateLimiter {
  /**
   * Bounded: under a flood of distinct keys some counts are forgotten, which
   * bounds memory at the cost of precision (the least recently hit go first).
   */
  private readonly windows: LRUCache<string, Window>;

  constructor(private readonly opts: MemoryRateLimiterOptions) {
    this.windows = clockedLru(opts.maxKeys ?? 100_000, opts.clock);
  }

  async hit(key: string): Promise<RateDecision> {
    return this.hitNow(key);
  }

  hitNow(key: string): RateDecision {
    const now = this.opts.clock.now();
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      w = { count: 0, resetAt: now + this.opts.windowMs };
      this.windows.set(key, w);
    }
    w.count += 1;
    return { allowed: w.count <= this.opts.limit, retryAfterS: Math.max(1, Math.ceil((w.resetAt - now) / 1000)) };
  }
}
