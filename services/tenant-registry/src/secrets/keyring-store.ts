import { LEGACY_KEY_ID, sealedKeyId } from '@service-relay/core';
import type { Queryable } from '../db/db';
import { COUNT_BY_KEY_SQL } from './sealed-columns';

/** The secrets_keyring row (migrations/014_secrets_keyring.sql). */
export interface KeyringRow {
  /** The key new values are sealed with; null: never chosen (k0). */
  activeKeyId: string | null;
  /** Keys that sealed before the active one, oldest first: never chosen again. */
  retired: string[];
  activatedAt: Date | null;
  /** The host-sync hash key, sealed; null while it is derived from k0. */
  hostSyncHashKey: string | null;
  leaseHolder: string | null;
  pass: PassState;
  /** When the last pass found nothing left to re-encrypt (null: not since the last activation). */
  doneAt: Date | null;
}

/** The re-encryption pass under way (table null: none). */
export interface PassState {
  target: string | null;
  table: string | null;
  after: string | null;
  startedAt: Date | null;
  reencrypted: number;
}

/** A running registry, as it last reported itself. */
export interface Holder {
  holder: string;
  keyIds: string[];
  /** The key it seals with now. */
  sealing: string;
  seenMsAgo: number;
}

/** Associated data of the sealed host-sync hash key. */
export const HASH_KEY_AAD = 'service-relay:host-sync-hash-key';

const toDate = (v: unknown): Date | null => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v)));
const toIds = (v: unknown): string[] => (typeof v === 'string' ? (JSON.parse(v) as string[]) : ((v as string[] | null) ?? []));

/** SQL for the keyring's own tables; every caller passes its connection or transaction. */
export const keyringStore = {
  async row(q: Queryable, lock = false): Promise<KeyringRow> {
    const [r] = await q.query(`SELECT * FROM secrets_keyring WHERE id = 1${lock ? ' FOR UPDATE' : ''}`);
    if (!r) throw new Error('secrets_keyring has no row (migration 014 not applied)');
    return {
      activeKeyId: (r.active_key_id as string | null) ?? null,
      retired: toIds(r.retired_key_ids),
      activatedAt: toDate(r.activated_at),
      hostSyncHashKey: (r.host_sync_hash_key as string | null) ?? null,
      leaseHolder: (r.lease_holder as string | null) ?? null,
      pass: {
        target: (r.pass_target as string | null) ?? null,
        table: (r.pass_table as string | null) ?? null,
        after: (r.pass_after as string | null) ?? null,
        startedAt: toDate(r.pass_started_at),
        reencrypted: Number(r.pass_reencrypted),
      },
      doneAt: toDate(r.done_at),
    };
  },

  /**
   * Sealed values per key id, the host-sync hash key included (under k0
   * while it is derived from k0 and some tenant has a hash).
   */
  async counts(q: Queryable, row: KeyringRow): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const r of await q.query<{ key_id: string; n: string | number }>(COUNT_BY_KEY_SQL)) out[r.key_id] = Number(r.n);
    let hashKeyId: string | undefined;
    if (row.hostSyncHashKey !== null) hashKeyId = sealedKeyId(row.hostSyncHashKey) ?? '?';
    else if ((await q.query('SELECT 1 FROM tenants WHERE deleted_at IS NULL LIMIT 1')).length > 0) hashKeyId = LEGACY_KEY_ID;
    if (hashKeyId !== undefined) out[hashKeyId] = (out[hashKeyId] ?? 0) + 1;
    return out;
  },

  async setActive(q: Queryable, id: string, retired: string[], hostSyncHashKey: string | null): Promise<void> {
    await q.query(
      `UPDATE secrets_keyring SET active_key_id = $1, retired_key_ids = $2::jsonb, host_sync_hash_key = $3, activated_at = now(),
         pass_target = NULL, pass_table = NULL, pass_after = NULL, pass_started_at = NULL, pass_reencrypted = 0, done_at = NULL WHERE id = 1`,
      [id, JSON.stringify(retired), hostSyncHashKey],
    );
  },

  async savePass(q: Queryable, pass: PassState, hostSyncHashKey: string | null, done: boolean): Promise<void> {
    await q.query(
      `UPDATE secrets_keyring SET pass_target = $1, pass_table = $2, pass_after = $3, pass_started_at = $4, pass_reencrypted = $5, host_sync_hash_key = $6,
         done_at = CASE WHEN $7::boolean THEN coalesce(done_at, now()) ELSE NULL END WHERE id = 1`,
      [pass.target, pass.table, pass.after, pass.startedAt?.toISOString() ?? null, pass.reencrypted, hostSyncHashKey, done],
    );
  },

  /** Records (or renews) a running registry and the keys it has. */
  async heartbeat(q: Queryable, holder: string, keyIds: readonly string[], sealing: string): Promise<void> {
    await q.query(
      `INSERT INTO secrets_key_holders (holder, key_ids, sealing_key_id, seen_at) VALUES ($1, $2::jsonb, $3, now())
       ON CONFLICT (holder) DO UPDATE SET key_ids = excluded.key_ids, sealing_key_id = excluded.sealing_key_id, seen_at = now()`,
      [holder, JSON.stringify(keyIds), sealing],
    );
  },

  async leave(q: Queryable, holder: string): Promise<void> {
    await q.query('DELETE FROM secrets_key_holders WHERE holder = $1', [holder]);
    await q.query('UPDATE secrets_keyring SET lease_holder = NULL, lease_until = NULL WHERE id = 1 AND lease_holder = $1', [holder]);
  },

  /** Registries heard from within `expiryMs` (the database's clock); older rows are deleted. */
  async holders(q: Queryable, expiryMs: number): Promise<Holder[]> {
    await q.query(`DELETE FROM secrets_key_holders WHERE seen_at < now() - $1 * interval '1 millisecond'`, [expiryMs]);
    const rows = await q.query(`SELECT holder, key_ids, sealing_key_id, extract(epoch FROM (now() - seen_at)) * 1000 AS ago FROM secrets_key_holders ORDER BY holder`);
    return rows.map((r) => ({ holder: String(r.holder), keyIds: toIds(r.key_ids), sealing: String(r.sealing_key_id), seenMsAgo: Math.max(0, Math.round(Number(r.ago))) }));
  },

  /** Takes or renews the re-encryption lease on the database's clock; true while `holder` has it. */
  async lease(q: Queryable, holder: string, ms: number): Promise<boolean> {
    const rows = await q.query(
      `UPDATE secrets_keyring SET lease_holder = $1, lease_until = now() + $2 * interval '1 millisecond'
        WHERE id = 1 AND (lease_holder IS NULL OR lease_holder = $1 OR lease_until < now()) RETURNING 1`,
      [holder, ms],
    );
    return rows.length > 0;
  },
};
