import { isCanonicalUuid, RelayError, systemClock, type Clock } from '@service-relay/core';
import { CallbacksStore } from './callbacks-store';
import type { TenantCrypto } from '../crypto/tenant-crypto';
import { newHostSyncClientId, newSecret, newTenantId } from '../crypto/random-secret';
import type { Db, Queryable } from '../db/db';
import type { HostSyncCredential, ListPosition, Tenant, TenantChange, TenantKeys, TenantPage } from '../tenants/tenant';
import { mergeLabels, sortedLabels, type TenantFilter, type TenantMetaInput } from '../tenants/tenant-meta';
import { applyAction, type FreshSecrets, type TenantAction } from '../tenants/tenant-rules';
import { UnknownTenants } from '../tenants/unknown-tenants';
import { ChannelRulesStore } from './channel-rules-store';
import { TenantDeletionStore, type DeleteOptions, type DeletedTenant, type TenantDeletion } from './tenant-deletion';
import { LimitsStore } from './limits-store';
import { FeedStore } from './feed-store';
import { parseUserRevocations, USER_REVOCATIONS_JSON, UserActionsStore } from './user-actions-store';
import { INSERT_TENANT, insertParams, normalizeRow, rowState, rowToTenant, TENANT_COLUMNS, UPDATE_TENANT, updateParams, withState, type TenantRow } from './tenant-row';

/**
 * Tenants and their secrets in PostgreSQL or PGlite. Every mutation locks the
 * tenant row (SELECT … FOR UPDATE) inside one transaction, so concurrent admin
 * calls on one tenant apply one after the other and none is lost. What an
 * action does to the slots is decided in tenants/tenant-rules.ts; this class
 * reads, locks, persists and records the feed change.
 * Secrets leave this class in plaintext only as return values; the table holds
 * sealed JWT secrets and host-sync hashes.
 */
export class TenantStore {
  readonly feed: FeedStore;
  /** Per-tenant channel rules; their writes share the feed and the tenant row lock. */
  readonly channelRules: ChannelRulesStore;
  /** A host's user-level revocations and disconnects; they share the feed and the tenant row lock. */
  readonly users: UserActionsStore;
  /** Plans and per-tenant limits (#30); their writes share the feed and the tenant row lock. */
  readonly limits: LimitsStore;
  /** Subscribe/publish callbacks (#32); their writes share the feed and the tenant row lock. */
  readonly callbacks: CallbacksStore;
  /**
   * Ids the database just said do not exist: key lookups and host-sync reads
   * of them are answered "no such tenant" without a query for a few seconds
   * (see unknown-tenants.ts for why a create is never hidden).
   */
  readonly unknown: UnknownTenants;
  private readonly deletion: TenantDeletionStore;

  /** `feedDb`: the feed's own connections (its reads keep consumers' leases running), the same database. */
  constructor(
    private readonly db: Db,
    private readonly crypto: TenantCrypto,
    private readonly clock: Clock = systemClock,
    feedDb: Db = db,
  ) {
    this.feed = new FeedStore(feedDb);
    this.unknown = new UnknownTenants(clock);
    this.channelRules = new ChannelRulesStore(db, this.feed, clock);
    this.users = new UserActionsStore(db, this.feed, clock);
    this.deletion = new TenantDeletionStore(db, this.feed, clock);
    this.limits = new LimitsStore(db, this.feed, clock);
    this.callbacks = new CallbacksStore(db, this.feed, crypto, clock);
  }

  /** `meta`: the name and labels to start with (labels set to null are simply not set). */
  async create(meta: TenantMetaInput = {}): Promise<TenantChange & { hostSyncSecret: string }> {
    const tenantId = newTenantId();
    const hostSyncSecret = newSecret();
    const now = this.now();
    const row: TenantRow = {
      tenant_id: tenantId,
      host_sync_client_id: newHostSyncClientId(),
      host_sync_secret_hash: this.crypto.hostSync.hash(hostSyncSecret),
      previous_host_sync_secret_hash: null,
      disabled: false,
      version: 1,
      primary_key_version: 1,
      primary_secret: this.crypto.sealJwtSecret(tenantId, 1, newSecret()),
      previous_key_version: null,
      previous_secret: null,
      created_at: now,
      updated_at: now,
      name: meta.name ?? null,
      labels: mergeLabels({}, meta.labels ?? {}) ?? {},
    };
    const event = { kind: 'created' as const, version: 1, revokedKeyVersions: [] };
    const seq = await this.db.transaction(async (tx) => {
      await tx.query(INSERT_TENANT, insertParams(row));
      return this.feed.record(tx, tenantId, event);
    });
    this.unknown.forget(tenantId);
    return { tenant: rowToTenant(row), hostSyncSecret, event: { ...event, seq } };
  }

  async get(tenantId: string): Promise<Tenant | undefined> {
    const row = await this.read(this.db, tenantId);
    return row && rowToTenant(row);
  }

  /**
   * Tenants ordered by (created_at, tenant_id), starting after `after`, those
   * that carry every label of `filter.labels` and whose name contains
   * `filter.search` (case-insensitive) only.
   */
  async list(limit: number, after?: ListPosition, filter: TenantFilter = {}): Promise<TenantPage> {
    const params: unknown[] = [limit + 1];
    const where: string[] = [];
    if (after) {
      params.push(after.createdAt.toISOString(), after.tenantId);
      where.push(`(created_at, tenant_id) > ($${params.length - 1}::timestamptz, $${params.length}::uuid)`);
    }
    if (filter.labels && Object.keys(filter.labels).length > 0) {
      params.push(JSON.stringify(filter.labels));
      where.push(`labels @> $${params.length}::jsonb`);
    }
    if (filter.search !== undefined) {
      // A literal substring: LIKE's own wildcards in it are escaped.
      params.push(`%${filter.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
      where.push(`name ILIKE $${params.length}`);
    }
    if (filter.disabled !== undefined) {
      params.push(filter.disabled);
      where.push(`disabled = $${params.length}`);
    }
    // Tombstones of deleted tenants are never listed.
    where.push('deleted_at IS NULL');
    const clause = `WHERE ${where.join(' AND ')}`;
    const raw = await this.db.query(`SELECT ${TENANT_COLUMNS} FROM tenants ${clause} ORDER BY created_at, tenant_id LIMIT $1`, params);
    const tenants = raw.slice(0, limit).map((r) => rowToTenant(normalizeRow(r)));
    const last = tenants[tenants.length - 1];
    const next = raw.length > limit && last ? { createdAt: last.createdAt, tenantId: last.tenantId } : null;
    return { tenants, next };
  }

  /**
   * Sets the name and labels (a label set to null is removed); no feed change,
   * as nothing token-relevant changed. Undefined when the tenant does not
   * exist, `'too_many_labels'` when more than MAX_LABELS would remain.
   */
  updateMeta(tenantId: string, meta: TenantMetaInput): Promise<Tenant | 'too_many_labels' | undefined> {
    return this.db.transaction(async (tx) => {
      const current = await this.read(tx, tenantId, true);
      if (!current) return undefined;
      const labels = meta.labels === undefined ? current.labels : mergeLabels(current.labels, meta.labels);
      if (labels === undefined) return 'too_many_labels' as const;
      const row: TenantRow = { ...current, name: meta.name === undefined ? current.name : meta.name, labels: sortedLabels(labels), updated_at: this.now() };
      await tx.query(UPDATE_TENANT, updateParams(row));
      return rowToTenant(row);
    });
  }

  setDisabled(tenantId: string, disabled: boolean): Promise<TenantChange | undefined> {
    return this.mutate(tenantId, disabled ? 'disable' : 'enable');
  }

  rotate(tenantId: string): Promise<TenantChange | undefined> {
    return this.mutate(tenantId, 'rotate');
  }

  expirePrevious(tenantId: string): Promise<TenantChange | undefined> {
    return this.mutate(tenantId, 'expire_previous');
  }

  revokeAll(tenantId: string): Promise<TenantChange | undefined> {
    return this.mutate(tenantId, 'revoke_all');
  }

  /** `keepPrevious`: the old secret stays accepted until expirePreviousHostSync (#33). */
  rotateHostSync(tenantId: string, keepPrevious = false): Promise<TenantChange | undefined> {
    return this.mutate(tenantId, keepPrevious ? 'rotate_host_sync_keep_previous' : 'rotate_host_sync');
  }

  expirePreviousHostSync(tenantId: string): Promise<TenantChange | undefined> {
    return this.mutate(tenantId, 'expire_previous_host_sync');
  }

  /**
   * Deletes the tenant for good (store/tenant-deletion.ts): purges its rows,
   * leaves a tombstone, records a `deleted` change. Undefined when no tenant,
   * live or deleted, has the id; a deleted one is deleted again (idempotent).
   */
  async delete(tenantId: string, opts: DeleteOptions = {}): Promise<TenantDeletion | undefined> {
    // Not remembered as unknown: the key answer of a deleted tenant carries its version (see keyAnswer).
    return this.deletion.delete(tenantId, opts);
  }

  /** Decrypted key material for verifiers; undefined for a deleted tenant too. */
  async getKeys(tenantId: string): Promise<TenantKeys | undefined> {
    const answer = await this.keyAnswer(tenantId);
    return answer && !('deleted' in answer) ? answer : undefined;
  }

  /**
   * What the verifiers' key lookup answers: the keys, or for a deleted
   * tenant its tombstone's version and feed position (no such tenant, but not
   * older than the `deleted` change a verifier applied: an answer at version
   * 0 would look stale to it), or undefined when no tenant ever had the id.
   */
  async keyAnswer(tenantId: string): Promise<TenantKeys | DeletedTenant | undefined> {
    if (!isCanonicalUuid(tenantId) || this.unknown.has(tenantId)) return undefined;
    // One statement, one snapshot: the keys reflect every change up to as_of_seq.
    const rows = await this.db.query(`SELECT ${TENANT_COLUMNS}, deleted_at, (SELECT seq FROM feed_state WHERE id = 1) AS as_of_seq, ${USER_REVOCATIONS_JSON} FROM tenants WHERE tenant_id = $1`, [tenantId]);
    if (!rows[0]) {
      this.unknown.add(tenantId);
      return undefined;
    }
    if (rows[0].deleted_at !== null) return { tenantId, deleted: true, version: Number(rows[0].version), asOfSeq: Number(rows[0].as_of_seq) };
    const row = normalizeRow(rows[0]);
    return {
      asOfSeq: Number(rows[0].as_of_seq),
      tenantId: row.tenant_id,
      disabled: row.disabled,
      version: row.version,
      primary: { secret: this.crypto.openJwtSecret(row.tenant_id, row.primary_key_version, row.primary_secret), keyVersion: row.primary_key_version },
      previous:
        row.previous_key_version === null || row.previous_secret === null
          ? null
          : { secret: this.crypto.openJwtSecret(row.tenant_id, row.previous_key_version, row.previous_secret), keyVersion: row.previous_key_version },
      userRevocations: parseUserRevocations(rows[0].user_revocations),
    };
  }

  async findHostSyncCredential(tenantId: string): Promise<HostSyncCredential | undefined> {
    if (!isCanonicalUuid(tenantId)) return undefined;
    if (this.unknown.has(tenantId)) {
      // While the database is down a known tenant's check is 503: an unknown one must not answer otherwise.
      if (this.db.silent) throw new RelayError('unavailable', 'database not answering');
      return undefined;
    }
    const [raw] = await this.db.query(`SELECT ${TENANT_COLUMNS}, deleted_at FROM tenants WHERE tenant_id = $1`, [tenantId]);
    // A tombstone is no tenant either, but is not remembered as unknown: the key lookup shares that memory and must see it.
    if (raw?.deleted_at !== null && raw?.deleted_at !== undefined) return undefined;
    const row = raw && normalizeRow(raw);
    if (!row) {
      this.unknown.add(tenantId);
      return undefined;
    }
    return {
      tenantId: row.tenant_id,
      hostSyncClientId: row.host_sync_client_id,
      secretHash: row.host_sync_secret_hash,
      previousSecretHash: row.previous_host_sync_secret_hash,
      disabled: row.disabled,
      primaryKeyVersion: row.primary_key_version,
      openPrimarySecret: () => this.crypto.openJwtSecret(row.tenant_id, row.primary_key_version, row.primary_secret),
    };
  }

  private async read(q: Queryable, tenantId: string, forUpdate = false): Promise<TenantRow | undefined> {
    // Anything but a canonical id cannot exist, and would be a uuid cast error in SQL.
    if (!isCanonicalUuid(tenantId)) return undefined;
    // A deleted tenant's tombstone is not a tenant: every reader sees none.
    const rows = await q.query(`SELECT ${TENANT_COLUMNS} FROM tenants WHERE tenant_id = $1 AND deleted_at IS NULL${forUpdate ? ' FOR UPDATE' : ''}`, [tenantId]);
    return rows[0] && normalizeRow(rows[0]);
  }

  /** Reads and locks the row, lets the tenant rules decide, persists the outcome and its feed record. */
  private mutate(tenantId: string, action: TenantAction): Promise<TenantChange | undefined> {
    return this.db.transaction(async (tx) => {
      const current = await this.read(tx, tenantId, true);
      if (!current) return undefined;
      let hostSyncSecret: string | undefined;
      const fresh: FreshSecrets = {
        jwtSecret: (keyVersion) => this.crypto.sealJwtSecret(current.tenant_id, keyVersion, newSecret()),
        hostSyncSecretHash: () => this.crypto.hostSync.hash((hostSyncSecret = newSecret())),
      };
      const { next, event } = applyAction(rowState(current), action, fresh);
      const row: TenantRow = { ...withState(current, next), updated_at: this.now() };
      await tx.query(UPDATE_TENANT, updateParams(row));
      const result: TenantChange = { tenant: rowToTenant(row) };
      if (event) result.event = { ...event, seq: await this.feed.record(tx, tenantId, event) };
      if (hostSyncSecret !== undefined) result.hostSyncSecret = hostSyncSecret;
      return result;
    });
  }

  private now(): Date {
    return new Date(this.clock.now());
  }
}
