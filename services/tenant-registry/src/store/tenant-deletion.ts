import { isCanonicalUuid, systemClock, type Clock } from '@service-relay/core';
import type { Db, Queryable } from '../db/db';
import type { CommittedChangeEvent } from '../tenants/tenant';
import type { FeedStore } from './feed-store';

/** One table's share of a tenant deletion: its rows of the tenant are deleted in the deletion's transaction. */
export interface PurgeStep {
  /** The table, as listed in the answer's `purged` counts. */
  table: string;
  /** Deletes the tenant's rows ($1: the tenant id); `RETURNING 1` lets the count be read. */
  sql: string;
  /** Usage rows are kept when the call asks (`?keep_usage=true`). */
  usage?: boolean;
}

/**
 * What a deletion removes from PostgreSQL, table by table, all in one
 * transaction with the tombstone. A table that holds rows per tenant adds
 * one line here: the usage table (#30 item 3, migration 010) becomes
 * `{ table: 'tenant_usage', sql: 'DELETE FROM tenant_usage WHERE tenant_id = $1 RETURNING 1', usage: true }`.
 * The audit log is not listed: it keeps the record of the tenant, deletion
 * included. The tenant feed's records are not either: they are the outbox
 * consumers read (pruned with the feed), and the `deleted` change is one.
 */
export const PURGE_STEPS: readonly PurgeStep[] = [
  { table: 'tenant_channel_rules', sql: 'DELETE FROM tenant_channel_rules WHERE tenant_id = $1 RETURNING 1' },
  { table: 'user_revocations', sql: 'DELETE FROM user_revocations WHERE tenant_id = $1 RETURNING 1' },
  // Its own limits and plan (migration 009); the plan itself stays, shared.
  { table: 'tenant_limits', sql: 'DELETE FROM tenant_limits WHERE tenant_id = $1 RETURNING 1' },
  // Subscribe/publish callbacks and their sealed secrets (migration 011, #32).
  { table: 'tenant_callbacks', sql: 'DELETE FROM tenant_callbacks WHERE tenant_id = $1 RETURNING 1' },
  // Usage metering (migration 010); `?keep_usage=true` keeps them.
  { table: 'tenant_usage', sql: 'DELETE FROM tenant_usage WHERE tenant_id = $1 RETURNING 1', usage: true },
  { table: 'tenant_usage_peaks', sql: 'DELETE FROM tenant_usage_peaks WHERE tenant_id = $1 RETURNING 1', usage: true },
  { table: 'tenant_usage_refusals', sql: 'DELETE FROM tenant_usage_refusals WHERE tenant_id = $1 RETURNING 1', usage: true },
  // Webhooks (migration 011): the log and the queue before the endpoints they belong to.
  { table: 'webhook_attempts', sql: 'DELETE FROM webhook_attempts WHERE tenant_id = $1 RETURNING 1' },
  { table: 'webhook_deliveries', sql: 'DELETE FROM webhook_deliveries WHERE tenant_id = $1 RETURNING 1' },
  { table: 'webhook_endpoints', sql: 'DELETE FROM webhook_endpoints WHERE tenant_id = $1 RETURNING 1' },
];

/** A deleted tenant as the key lookup sees it: no keys, the tombstone's version and the feed position read with it. */
export interface DeletedTenant {
  tenantId: string;
  deleted: true;
  version: number;
  asOfSeq: number;
}

export interface DeleteOptions {
  /** Keep the usage rows (the steps marked `usage`). */
  keepUsage?: boolean;
}

export interface TenantDeletion {
  tenantId: string;
  /** When the tenant was first deleted (a repeated deletion keeps it). */
  deletedAt: Date;
  /** Rows deleted by this call, per purge step's table (0 on a repeat). */
  purged: Record<string, number>;
  /** The tables whose rows this call kept (usage with keepUsage). */
  kept: string[];
  /** The call asked to keep usage rows. */
  usageKept: boolean;
  /** Whether the tenant was already deleted before this call. */
  repeated: boolean;
  /** The `deleted` change this call recorded: every call records one, so a retry re-propagates (and re-purges). */
  event: CommittedChangeEvent;
}

/**
 * Deletes tenants for good (#30): in one transaction, locks the row (live or
 * tombstone), runs every purge step, turns the row into a tombstone (secrets,
 * host-sync hash, name and labels destroyed, `deleted_at` set, version +1)
 * and records a `deleted` change in the tenant feed. The tombstone keeps the
 * id and host-sync client id taken forever.
 */
export class TenantDeletionStore {
  constructor(
    private readonly db: Db,
    private readonly feed: FeedStore,
    private readonly clock: Clock = systemClock,
    private readonly steps: readonly PurgeStep[] = PURGE_STEPS,
  ) {}

  /** Undefined when no tenant (live or deleted) has this id. */
  delete(tenantId: string, opts: DeleteOptions = {}): Promise<TenantDeletion | undefined> {
    if (!isCanonicalUuid(tenantId)) return Promise.resolve(undefined);
    return this.db.transaction(async (tx) => {
      const [row] = await tx.query<{ version: string | number; primary_key_version: string | number; previous_key_version: string | number | null; deleted_at: unknown }>(
        'SELECT version, primary_key_version, previous_key_version, deleted_at FROM tenants WHERE tenant_id = $1 FOR UPDATE',
        [tenantId],
      );
      if (!row) return undefined;
      const repeated = row.deleted_at !== null && row.deleted_at !== undefined;
      const now = new Date(this.clock.now());
      const deletedAt = repeated ? toDate(row.deleted_at) : now;
      const { purged, kept } = await this.purge(tx, tenantId, opts);
      const version = Number(row.version) + 1;
      await tx.query(
        `UPDATE tenants SET deleted_at = $2, updated_at = $3, version = $4, disabled = true,
                primary_secret = NULL, previous_secret = NULL, previous_key_version = NULL, host_sync_secret_hash = NULL, previous_host_sync_secret_hash = NULL,
                name = NULL, labels = '{}'::jsonb
          WHERE tenant_id = $1`,
        [tenantId, deletedAt.toISOString(), now.toISOString(), version],
      );
      // Every key version the tenant ever had is gone: consumers treat the change as a revocation of all of them.
      const revokedKeyVersions = repeated ? [] : [Number(row.primary_key_version), ...(row.previous_key_version === null ? [] : [Number(row.previous_key_version)])];
      const event = { kind: 'deleted' as const, version, revokedKeyVersions };
      const seq = await this.feed.record(tx, tenantId, event);
      return { tenantId, deletedAt, purged, kept, usageKept: opts.keepUsage === true, repeated, event: { ...event, seq } };
    });
  }

  private async purge(tx: Queryable, tenantId: string, opts: DeleteOptions): Promise<{ purged: Record<string, number>; kept: string[] }> {
    const purged: Record<string, number> = {};
    const kept: string[] = [];
    for (const step of this.steps) {
      if (step.usage && opts.keepUsage) {
        kept.push(step.table);
        continue;
      }
      purged[step.table] = (await tx.query(step.sql, [tenantId])).length;
    }
    return { purged, kept };
  }
}

function toDate(v: unknown): Date {
  return v instanceof Date ? v : new Date(String(v));
}
