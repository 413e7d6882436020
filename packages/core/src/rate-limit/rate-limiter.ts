export interface RateDecision {
  allowed: boolean;
  /** Whole seconds until the window resets (at least 1); for Retry-After. */
  retryAfterS: number;
}

/** Counts hits per key in fixed windows. Drivers: memory-rate-limiter.ts, redis-rate-limiter.ts; factory: create-rate-limiter.ts. */
export interface RateLimiter {
  hit(key: string): Promise<RateDecision>;
}
