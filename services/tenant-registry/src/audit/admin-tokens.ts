import { createHash } from 'node:crypto';
import { safeEqual } from '@service-relay/core';

/** The audit log's caller for a request that presented no valid admin token. */
export const UNAUTHENTICATED = 'unauthenticated';

/** First 8 hex characters of SHA-256 of the token: tells tokens apart in the audit log without revealing them. */
export function tokenFingerprint(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex').slice(0, 8);
}

/**
 * The admin tokens the registry accepts: ADMIN_TOKEN and, during a rotation,
 * ADMIN_TOKEN_NEXT. A caller is named by the slot it used and the token's
 * fingerprint ("current:1a2b3c4d", "next:5e6f7a8b"), never by the token.
 */
export class AdminTokens {
  private readonly slots: ReadonlyArray<{ token: string; actor: string }>;

  constructor(current: string, next?: string) {
    const slots = [{ token: current, actor: `current:${tokenFingerprint(current)}` }];
    if (next !== undefined) slots.push({ token: next, actor: `next:${tokenFingerprint(next)}` });
    this.slots = slots;
  }

  /** The caller a presented token names, or undefined. Every accepted token is compared, timing-safely, whichever matches. */
  identify(presented: string | undefined): string | undefined {
    if (presented === undefined) return undefined;
    let actor: string | undefined;
    for (const slot of this.slots) {
      if (safeEqual(presented, slot.token) && actor === undefined) actor = slot.actor;
    }
    return actor;
  }

  /** The accepted callers' names, for the start-up log line. */
  get actors(): string[] {
    return this.slots.map((s) => s.actor);
  }
}
