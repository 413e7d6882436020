import { backoffDelay, refreshDelay } from './backoff.js';
import { RelayClientError } from './client-error.js';

type Timer = ReturnType<typeof setTimeout>;

/** What a connection's refresher needs from the client. */
export interface RefreshHost {
  getToken(): Promise<string>;
  /** Sends `auth` on this connection; resolves at `authenticated`, rejects with the error frame's RelayClientError. */
  sendAuth(token: string): Promise<void>;
  emitError(error: RelayClientError): void;
  /** A timer that dies with the connection. */
  after(ms: number, fn: () => void): Timer;
  cancel(timer: Timer): void;
  /** Whether the connection is still the client's current one. */
  current(): boolean;
  now(): number;
  random(): number;
}

/**
 * Keeps one connection authenticated (docs/PROTOCOL.md "Keeping a
 * connection authenticated"): `auth` with a token from getToken before
 * `expires_at`, retried while the old token lasts; a refusal never shortens
 * the connection, so it is reported and tried again, not fatal.
 */
export class TokenRefresh {
  private timer: Timer | undefined;
  /** Refreshes scheduled while this clock disagreed with the server's about expiry, in a row. */
  private skewed = 0;

  constructor(private readonly host: RefreshHost) {}

  /** (Re)plans the refresh for a token that expires at `expiresAt` (seconds, the server's `expires_at`). */
  schedule(expiresAt: number): void {
    if (this.timer !== undefined) this.host.cancel(this.timer);
    let delay = refreshDelay(expiresAt, this.host.now());
    if (delay === 0) {
      // The server took a token this clock says has expired: the clock is
      // ahead by more than the token's lifetime. Refreshing at once would loop;
      // refresh at a growing interval instead (a real expiry still ends in 4401 and a reconnect).
      delay = Math.min(300_000, 5000 * 2 ** Math.min(this.skewed++, 6));
    } else {
      this.skewed = 0;
    }
    this.timer = this.host.after(delay, () => void this.refresh(expiresAt, 0));
  }

  private async refresh(expiresAt: number, attempt: number): Promise<void> {
    if (!this.host.current()) return;
    let token: string;
    try {
      token = await this.host.getToken();
      if (typeof token !== 'string' || token.length === 0) throw new TypeError('getToken must resolve to a non-empty string');
    } catch (err) {
      this.host.emitError(new RelayClientError('token_provider_failed', 'getToken failed during a refresh', { cause: err }));
      return this.retry(expiresAt, attempt, 0);
    }
    if (!this.host.current()) return;
    try {
      await this.host.sendAuth(token);
    } catch (err) {
      const e = err as RelayClientError;
      if (e.code === 'connection_lost' || e.code === 'closed') return;
      this.host.emitError(e);
      // identity_mismatch: this token is for someone else; the connection runs out at its expiry (4401), then reconnects with whatever getToken gives.
      if (e.code !== 'identity_mismatch') this.retry(expiresAt, attempt, e.details.retryAfterMs ?? 0);
    }
  }

  /**
   * Tries again within the time left before expiry, not sooner than a
   * `rate_limited` answer's `retry_after_ms` unless that would miss the expiry.
   */
  private retry(expiresAt: number, attempt: number, atLeastMs: number): void {
    if (!this.host.current()) return;
    const left = expiresAt * 1000 - this.host.now();
    if (left <= 0) return;
    const delay = Math.min(Math.max(atLeastMs, backoffDelay(attempt, { initialDelayMs: 1000 }, this.host.random)), left / 2);
    this.timer = this.host.after(delay, () => void this.refresh(expiresAt, attempt + 1));
  }
}
