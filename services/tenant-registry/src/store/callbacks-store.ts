import { isCanonicalUuid, newSigningSecret, systemClock, type Clock } from '@service-relay/core';
import { callbackSettingsJson, parseCallbackSettings, type CallbackSettings } from '@service-relay/channels';
import type { TenantCrypto } from '../crypto/tenant-crypto';
import type { Db, Queryable } from '../db/db';
import type { CommittedChangeEvent } from '../tenants/tenant';
import type { FeedStore } from './feed-store';

/** A tenant's callbacks as an operator or host sees them (never a secret). */
export interface TenantCallbacks {
  tenantId: string;
  /** Null: the tenant has no callbacks. */
  settings: CallbackSettings | null;
  /** Per tenant, only ever growing; 0 while nothing was ever set. */
  version: number;
  /** A previous signing secret is still signed with (a rotation's overlap). */
  hasPreviousSecret: boolean;
}

/** What the tenant feed's TenantCallbacks RPC answers: with the secrets (current first) and the feed sequence. */
export interface CallbacksSnapshot extends TenantCallbacks {
  secrets: string[];
  asOfSeq: number;
}

/** A committed change, with the new secret in plaintext when this call made one (shown once). */
export interface CallbacksChange {
  callbacks: TenantCallbacks;
  secret?: string;
  event: CommittedChangeEvent;
}

/** What one write does: nothing ('none'), or the new settings (null: none) and what becomes of the secrets. */
type Decision =
  | 'none'
  | {
      settings: string | null;
      /** A new current secret. */
      fresh?: { plain: string; sealed: string; version: number };
      /** The secret that becomes the previous one. */
      previous?: { sealed: string; version: number };
      /** The current (and previous, unless dropPrevious) secrets stay. */
      keepSecrets?: boolean;
      dropPrevious?: boolean;
    };

interface Row {
  settings: unknown;
  secret_sealed: string | null;
  secret_version: string | number;
  previous_secret_sealed: string | null;
  previous_secret_version: string | number | null;
  version: string | number;
}

/**
 * Per-tenant callbacks (migrations/011_tenant_callbacks.sql). Every write
 * locks the tenant row (serializing with every tenant mutation), stores the
 * next version and records a `callbacks` feed change carrying only
 * `{ callbacks_version }` in the same transaction: the secret stays sealed in
 * PostgreSQL and reaches realtime only through the internal TenantCallbacks
 * RPC. `set` makes a signing secret when the tenant has none; `rotate` makes
 * a new one and keeps the old as previous until `expirePrevious` (or the next
 * rotation); `remove` drops settings and secrets.
 */
export class CallbacksStore {
  constructor(
    private readonly db: Db,
    private readonly feed: FeedStore,
    private readonly crypto: TenantCrypto,
    private readonly clock: Clock = systemClock,
  ) {}

  async get(tenantId: string): Promise<TenantCallbacks | undefined> {
    const s = await this.read(this.db, tenantId, false);
    return s && view(tenantId, s.row);
  }

  /** The settings, the opened secrets and, read in the same statement, the feed sequence. Undefined when the tenant does not exist. */
  async snapshot(tenantId: string): Promise<CallbacksSnapshot | undefined> {
    const s = await this.read(this.db, tenantId, false);
    if (!s) return undefined;
    const secrets: string[] = [];
    const r = s.row;
    if (r && r.settings !== null && r.secret_sealed !== null) {
      secrets.push(this.crypto.openCallbackSecret(tenantId, Number(r.secret_version), r.secret_sealed));
      if (r.previous_secret_sealed !== null && r.previous_secret_version !== null) secrets.push(this.crypto.openCallbackSecret(tenantId, Number(r.previous_secret_version), r.previous_secret_sealed));
    }
    return { ...view(tenantId, r), secrets, asOfSeq: s.asOfSeq };
  }

  /** Sets the settings; a tenant without a signing secret gets one (returned once). */
  set(tenantId: string, settings: CallbackSettings): Promise<CallbacksChange | undefined> {
    return this.write(tenantId, (row) => {
      const doc = JSON.stringify(callbackSettingsJson(settings));
      if (row?.secret_sealed) return { settings: doc, keepSecrets: true };
      return { settings: doc, fresh: this.freshSecret(tenantId, Number(row?.secret_version ?? 0) + 1) };
    }) as Promise<CallbacksChange | undefined>;
  }

  /** Removes the settings and the secrets; `undefined` when the tenant does not exist, 'none' when it had no callbacks. */
  remove(tenantId: string): Promise<CallbacksChange | 'none' | undefined> {
    return this.write(tenantId, (row) => (row?.settings == null ? 'none' : { settings: null }));
  }

  /** A new signing secret (returned once); the current one stays valid as previous. 'none' without callbacks. */
  rotateSecret(tenantId: string): Promise<CallbacksChange | 'none' | undefined> {
    return this.write(tenantId, (row) => {
      if (row?.settings == null || !row.secret_sealed) return 'none';
      return { settings: JSON.stringify(row.settings), fresh: this.freshSecret(tenantId, Number(row.secret_version) + 1), previous: { sealed: row.secret_sealed, version: Number(row.secret_version) } };
    });
  }

  /** The previous secret is no longer signed with. 'none' without callbacks. */
  expirePrevious(tenantId: string): Promise<CallbacksChange | 'none' | undefined> {
    return this.write(tenantId, (row) => (row?.settings == null ? 'none' : { settings: JSON.stringify(row.settings), keepSecrets: true, dropPrevious: true }));
  }

  private freshSecret(tenantId: string, version: number): { plain: string; sealed: string; version: number } {
    const plain = newSigningSecret();
    return { plain, sealed: this.crypto.sealCallbackSecret(tenantId, version, plain), version };
  }

  private async read(q: Queryable, tenantId: string, lock: boolean): Promise<{ row: Row | undefined; asOfSeq: number } | undefined> {
    if (!isCanonicalUuid(tenantId)) return undefined;
    const rows = await q.query<Row & { found: number; as_of_seq: string | number }>(
      `SELECT 1 AS found, c.settings, c.secret_sealed, c.secret_version, c.previous_secret_sealed, c.previous_secret_version, c.version,
              (SELECT seq FROM feed_state WHERE id = 1) AS as_of_seq
         FROM tenants t LEFT JOIN tenant_callbacks c ON c.tenant_id = t.tenant_id
        WHERE t.tenant_id = $1 AND t.deleted_at IS NULL${lock ? ' FOR UPDATE OF t' : ''}`,
      [tenantId],
    );
    const r = rows[0];
    if (!r) return undefined;
    const row = r.version === null ? undefined : { ...r, settings: typeof r.settings === 'string' ? JSON.parse(r.settings) : r.settings };
    return { row, asOfSeq: Number(r.as_of_seq) };
  }

  private write(tenantId: string, decide: (row: Row | undefined) => Decision): Promise<CallbacksChange | 'none' | undefined> {
    if (!isCanonicalUuid(tenantId)) return Promise.resolve(undefined);
    return this.db.transaction(async (tx) => {
      const [tenant] = await tx.query<{ version: string | number }>('SELECT version FROM tenants WHERE tenant_id = $1 AND deleted_at IS NULL FOR UPDATE', [tenantId]);
      if (!tenant) return undefined;
      const current = (await this.read(tx, tenantId, false))?.row;
      const d = decide(current);
      if (d === 'none') return 'none';
      const version = current ? Number(current.version) + 1 : 1;
      let secret: [string | null, number] = [null, Number(current?.secret_version ?? 0)];
      let previous: [string | null, number | null] = [null, null];
      if (d.keepSecrets && current) {
        secret = [current.secret_sealed, Number(current.secret_version)];
        if (!d.dropPrevious) previous = [current.previous_secret_sealed, current.previous_secret_version === null ? null : Number(current.previous_secret_version)];
      }
      if (d.fresh) secret = [d.fresh.sealed, d.fresh.version];
      if (d.previous) previous = [d.previous.sealed, d.previous.version];
      await tx.query(
        `INSERT INTO tenant_callbacks (tenant_id, settings, secret_sealed, secret_version, previous_secret_sealed, previous_secret_version, version, updated_at)
              VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (tenant_id) DO UPDATE SET settings = excluded.settings, secret_sealed = excluded.secret_sealed, secret_version = excluded.secret_version,
           previous_secret_sealed = excluded.previous_secret_sealed, previous_secret_version = excluded.previous_secret_version, version = excluded.version, updated_at = excluded.updated_at`,
        [tenantId, d.settings, secret[0], secret[1], previous[0], previous[1], version, new Date(this.clock.now()).toISOString()],
      );
      const event = { kind: 'callbacks' as const, version: Number(tenant.version), revokedKeyVersions: [], detail: { callbacks_version: version } };
      const seq = await this.feed.record(tx, tenantId, event);
      const settings = d.settings === null ? null : storedSettings(JSON.parse(d.settings));
      return {
        callbacks: { tenantId, settings, version, hasPreviousSecret: settings !== null && previous[0] !== null },
        ...(d.fresh && { secret: d.fresh.plain }),
        event: { ...event, seq },
      } satisfies CallbacksChange;
    });
  }
}

function view(tenantId: string, r: Row | undefined): TenantCallbacks {
  if (!r) return { tenantId, settings: null, version: 0, hasPreviousSecret: false };
  const settings = r.settings === null || r.settings === undefined ? null : storedSettings(r.settings);
  return { tenantId, settings, version: Number(r.version), hasPreviousSecret: settings !== null && r.previous_secret_sealed !== null };
}

/** Stored settings were validated when written (loopback and https alike); one that no longer parses is a fault, not silence. */
function storedSettings(value: unknown): CallbackSettings {
  const parsed = parseCallbackSettings(value, true);
  if (typeof parsed === 'string') throw new Error(`stored callback settings do not parse: ${parsed}`);
  return parsed;
}
