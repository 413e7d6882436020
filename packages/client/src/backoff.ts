export interface BackoffOptions {
  /** First delay (default 500 ms). */
  initialDelayMs?: number;
  /** Ceiling of the doubling (default 30 000 ms). */
  maxDelayMs?: number;
}

/**
 * Exponential backoff with full jitter: attempt n waits a random time in
 * [d/2, d) with d = min(max, initial * 2^n), so a fleet of clients dropped by
 * one restart does not come back in one wave, and nobody waits 0.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions, random: () => number): number {
  const initial = opts.initialDelayMs ?? 500;
  const max = opts.maxDelayMs ?? 30_000;
  const ceiling = Math.min(max, initial * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * When to send `auth` before the token expires (docs/PROTOCOL.md "Keeping a
 * connection authenticated"): at 80 % of the remaining lifetime or a minute
 * before expiry, whichever is earlier, but never before half of it (a token
 * shorter than a minute would otherwise be refreshed in a loop).
 */
export function refreshDelay(expiresAtS: number, nowMs: number): number {
  const remaining = expiresAtS * 1000 - nowMs;
  if (remaining <= 0) return 0;
  return Math.max(remaining / 2, Math.min(remaining * 0.8, remaining - 60_000));
}
