import type { Clock } from '../clock';
import type { RateDecision, RateLimiter } from './rate-limiter';

interface Window {
  count: number;
  resetAt: number;
}

export interface MemoryRateLimiterOptions {
  limit: number;
  windowMs: number;
  clock: Clock;
  /** Keys tracked at once; beyond it expired windows are swept, then the oldest dropped. */
  maxKeys?: number;
}

/** Fixed-window counter in this process: the default, and the fallback while Redis is down. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, Window>();
  private readonly maxKeys: number;

  constructor(private readonly opts: MemoryRateLimiterOptions) {
    this.maxKeys = opts.maxKeys ?? 100_000;
  }

  async hit(key: string): Promise<RateDecision> {
    return this.hitNow(key);
  }

  hitNow(key: string): RateDecision {
    const now = this.opts.clock.now();
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      if (w) this.windows.delete(key);
      w = { count: 0, resetAt: now + this.opts.windowMs };
      this.windows.set(key, w);
      if (this.windows.size > this.maxKeys) this.evict(now);
    }
    w.count += 1;
    return { allowed: w.count <= this.opts.limit, retryAfterS: Math.max(1, Math.ceil((w.resetAt - now) / 1000)) };
  }

  private evict(now: number): void {
    for (const [k, w] of this.windows) if (w.resetAt <= now) this.windows.delete(k);
    // Still full of live windows: drop the oldest. Under a flood of distinct
    // keys this forgets some counts, which bounds memory at the cost of precision.
    while (this.windows.size > this.maxKeys) this.windows.delete(this.windows.keys().next().value!);
  }
}
