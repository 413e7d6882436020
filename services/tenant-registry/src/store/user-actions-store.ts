import { isCanonicalUuid, systemClock, type Clock } from '@service-relay/core';
import type { Db } from '../db/db';
import type { CommittedChangeEvent } from '../tenants/tenant';
import type { FeedStore } from './feed-store';

/** A user-level revocation as stored: that user's tokens with `iat` absent or before `before` (unix seconds) are refused. */
export interface UserRevocation {
  userId: string;
  before: number;
}

/**
 * A host's user-level actions (issue #13): revoke one user's tokens issued
 * before a moment, and disconnect one user. Each locks the tenant row (so it
 * serializes with every other tenant mutation) and commits its tenant feed
 * change in the same transaction.
 *
 * A revocation affects tokens, so it raises the tenant's state version like
 * every such change: the verifier's version floor then refuses any cached key
 * entry (in process or Redis) from before it. A disconnect affects no token
 * and leaves the version alone. `user_id` is kept lowercase.
 */
export class UserActionsStore {
  constructor(
    private readonly db: Db,
    private readonly feed: FeedStore,
    private readonly clock: Clock = systemClock,
  ) {}

  /**
   * Records the revocation (a later `before` than the stored one wins; an
   * earlier one keeps the stored moment, which the change then carries).
   * Undefined when the tenant does not exist.
   */
  revoke(tenantId: string, userId: string, before: number): Promise<{ revocation: UserRevocation; event: CommittedChangeEvent } | undefined> {
    if (!isCanonicalUuid(tenantId)) return Promise.resolve(undefined);
    const user = userId.toLowerCase();
    return this.db.transaction(async (tx) => {
      const now = new Date(this.clock.now()).toISOString();
      const [tenant] = await tx.query<{ version: string | number }>('UPDATE tenants SET version = version + 1, updated_at = $2 WHERE tenant_id = $1 AND deleted_at IS NULL RETURNING version', [tenantId, now]);
      if (!tenant) return undefined;
      const [row] = await tx.query<{ before: string | number }>(
        `INSERT INTO user_revocations (tenant_id, user_id, before, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant_id, user_id) DO UPDATE SET before = GREATEST(user_revocations.before, excluded.before), updated_at = excluded.updated_at
         RETURNING before`,
        [tenantId, user, before, now],
      );
      const effective = Number(row!.before);
      const event = { kind: 'user_revoked' as const, version: Number(tenant.version), revokedKeyVersions: [], detail: { user_id: user, before: effective } };
      const seq = await this.feed.record(tx, tenantId, event);
      return { revocation: { userId: user, before: effective }, event: { ...event, seq } };
    });
  }

  /** Commits a `user_disconnected` change. Undefined when the tenant does not exist. */
  disconnect(tenantId: string, userId: string): Promise<CommittedChangeEvent | undefined> {
    if (!isCanonicalUuid(tenantId)) return Promise.resolve(undefined);
    const user = userId.toLowerCase();
    return this.db.transaction(async (tx) => {
      const [tenant] = await tx.query<{ version: string | number }>('SELECT version FROM tenants WHERE tenant_id = $1 AND deleted_at IS NULL FOR UPDATE', [tenantId]);
      if (!tenant) return undefined;
      const event = { kind: 'user_disconnected' as const, version: Number(tenant.version), revokedKeyVersions: [], detail: { user_id: user } };
      const seq = await this.feed.record(tx, tenantId, event);
      return { ...event, seq };
    });
  }

  /**
   * Drops revocations whose moment is more than `keepS` seconds ago: every
   * token issued before it has expired by then, as long as `keepS` is at
   * least the verifier's MAX_TOKEN_LIFETIME_S (see ARCHITECTURE "Host server API").
   */
  async prune(keepS: number): Promise<number> {
    const cutoff = Math.floor(this.clock.now() / 1000) - keepS;
    const rows = await this.db.query<{ n: string | number }>('WITH d AS (DELETE FROM user_revocations WHERE before < $1 RETURNING 1) SELECT count(*) AS n FROM d', [cutoff]);
    return Number(rows[0]?.n ?? 0);
  }
}

/**
 * The SQL expression (for the tenant's row `t`) that reads its revocations as
 * a JSON array `[[user_id, before], …]`, in the statement that reads its keys.
 */
export const USER_REVOCATIONS_JSON = `(SELECT coalesce(json_agg(json_build_array(r.user_id, r.before)), '[]'::json) FROM user_revocations r WHERE r.tenant_id = tenants.tenant_id) AS user_revocations`;

/** Parses what USER_REVOCATIONS_JSON read (a string on some drivers). */
export function parseUserRevocations(value: unknown): UserRevocation[] {
  const list = (typeof value === 'string' ? JSON.parse(value) : value) as Array<[string, string | number]> | null | undefined;
  return (list ?? []).map(([userId, before]) => ({ userId, before: Number(before) }));
}
