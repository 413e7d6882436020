import type { Clock } from '@service-relay/core';

export type TakeResult = { ok: true } | { ok: false; retryAfterMs: number };

/**
 * A token bucket on an injected clock: `burst` tokens at most, refilled at
 * `ratePerS`. Two numbers per connection and no timer: the refill is
 * computed from the elapsed time when a token is asked for.
 */
export class TokenBucket {
  private tokens: number;
  private updatedAt: number;

  constructor(
    readonly ratePerS: number,
    readonly burst: number,
    private readonly clock: Clock,
  ) {
    this.tokens = burst;
    this.updatedAt = clock.now();
  }

  take(): TakeResult {
    const now = this.clock.now();
    // A clock that steps back (ManualClock.set, NTP) refills nothing rather than draining.
    const elapsed = Math.max(0, now - this.updatedAt);
    this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.ratePerS) / 1000);
    this.updatedAt = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.ratePerS)) };
  }
}
