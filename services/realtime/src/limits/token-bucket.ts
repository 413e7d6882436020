import type { Clock } from '@service-relay/core';

export type TakeResult = { ok: true } | { ok: false; retryAfterMs: number };

/** Tokens are counted in thousandths: `ratePerS` of them accrue per millisecond, so every step is an integer. */
const UNIT = 1000;

/**
 * A token bucket on an injected clock: `burst` tokens at most, refilled at
 * `ratePerS`. Two numbers per connection and no timer: the refill is
 * computed from the elapsed time when a token is asked for.
 */
export class TokenBucket {
  private milliTokens: number;
  private updatedAt: number;

  constructor(
    readonly ratePerS: number,
    readonly burst: number,
    private readonly clock: Clock,
  ) {
    this.milliTokens = burst * UNIT;
    this.updatedAt = clock.now();
  }

  /** The same bucket under a new limit (#30: a tenant's limits changed): what it holds carries over, capped at the new burst. */
  resized(ratePerS: number, burst: number): TokenBucket {
    const next = new TokenBucket(ratePerS, burst, this.clock);
    this.refill();
    next.milliTokens = Math.min(burst * UNIT, this.milliTokens);
    return next;
  }

  take(n = 1): TakeResult {
    this.refill();
    if (this.milliTokens >= n * UNIT) {
      this.milliTokens -= n * UNIT;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.ceil((n * UNIT - this.milliTokens) / this.ratePerS) };
  }

  private refill(): void {
    const now = this.clock.now();
    // A clock that steps back (ManualClock.set, NTP) refills nothing rather than draining.
    const elapsedMs = Math.max(0, now - this.updatedAt);
    this.milliTokens = Math.min(this.burst * UNIT, this.milliTokens + elapsedMs * this.ratePerS);
    this.updatedAt = now;
  }
}
