import { codeOf, type RelayError } from '@service-relay/core';
import { sameHolder } from '../authz/revocation-rule';
import { replyFrame, type Ref } from './client-frame';
import type { ConnectionContext, FrameConnection } from './connection-context';

/**
 * `auth` frames a connection may send per minute, unless AUTH_FRAMES_PER_MINUTE
 * says otherwise. A client refreshes once per token lifetime (minutes at
 * least); a few retries on top fit easily. Each frame costs a verifier call,
 * so the bound is what keeps one connection from starving everyone else's
 * upgrades.
 */
export const AUTH_FRAMES_PER_MINUTE = 10;
const AUTH_WINDOW_MS = 60_000;

/**
 * A connection's `auth` frames: the new token is verified fresh, must be the
 * same holder's, and then replaces the old one (and its expiry). Made on a
 * connection's first `auth` frame: most connections never send one.
 */
export class TokenRefresh {
  /** One refresh at a time: a second `auth` while one is being checked is refused. */
  private refreshing = false;
  private windowStart = 0;
  private frames = 0;

  constructor(
    private readonly conn: FrameConnection,
    private readonly ctx: ConnectionContext,
  ) {}

  async refresh(token: string, ref: Ref | undefined): Promise<void> {
    const conn = this.conn;
    // One in flight: the limit is the pending check, which ends with its own reply.
    if (this.refreshing) return conn.refuse('auth_frames', 'rate_limited', ref, { limit: 1 });
    const perMinute = this.ctx.authFramesPerMinute ?? AUTH_FRAMES_PER_MINUTE;
    if (!this.takeFrame(perMinute)) {
      return conn.refuse('auth_frames', 'rate_limited', ref, { limit: perMinute, retry_after_ms: Math.max(1, this.windowStart + AUTH_WINDOW_MS - this.ctx.scheduler.now()) });
    }
    this.refreshing = true;
    const result = await this.ctx.registry
      .verifyFresh(token, 'refresh')
      .catch((err: unknown) => err as RelayError)
      .finally(() => (this.refreshing = false));
    if (conn.closed) return;
    if (result instanceof Error) return conn.error(codeOf(result), ref);
    if (!result.valid) return conn.error('invalid_or_missing_token', ref);
    const next = result.identity;
    if (!sameHolder(conn.identity, next)) return conn.error('identity_mismatch', ref);
    // verifyFresh judged it fresh and nothing yielded since; asked again so a later edit cannot open a gap.
    if (!this.ctx.registry.isFresh(next)) return conn.error('auth_unavailable', ref);
    conn.renew(next, token);
    conn.send(replyFrame({ type: 'authenticated', expires_at: next.expiresAt }, ref));
  }

  /** Fixed one-minute windows on the scheduler's clock. */
  private takeFrame(perMinute: number): boolean {
    const now = this.ctx.scheduler.now();
    if (now - this.windowStart >= AUTH_WINDOW_MS) {
      this.windowStart = now;
      this.frames = 0;
    }
    if (this.frames >= perMinute) return false;
    this.frames++;
    return true;
  }
}
