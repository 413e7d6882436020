import { LEGACY_KEY_ID, sealedKeyId, sealedPrefix, type Keyring } from '@service-relay/core';
import type { Db, Queryable } from '../db/db';
import { HASH_KEY_AAD, keyringStore, type PassState } from './keyring-store';
import { SEALED_TABLES, type SealedTable } from './sealed-columns';

/** The pass's last step, after the tables: the host-sync hash key. */
const HASH_KEY_STEP = 'host_sync_hash_key';
const STEPS = [...SEALED_TABLES.map((t) => t.table), HASH_KEY_STEP];

/** What one call of `reencryptStep` did. */
export type StepResult =
  /** Values were re-sealed (or the pass moved on): call again. */
  | { kind: 'progress'; reencrypted: number }
  /** Nothing is left under another key and every registry seals with the active one: the pass is over. */
  | { kind: 'done'; newlyDone: boolean }
  /** Not this replica's turn (another holds the lease), or it lacks the sealing key. */
  | { kind: 'idle' };

export interface ReencryptOptions {
  db: Db;
  keyring: Keyring;
  /** This replica's lease holder id: a step runs only while it holds the lease. */
  holder: string;
  /** Rows per transaction. */
  batch: number;
  /** The host-sync hash key in use (sealed under the target when the pass reaches it). */
  hostSyncHashKey: Buffer;
  /** Registries not heard from for this long are gone (keyring-coordinator.ts). */
  holderExpiryMs: number;
}

/**
 * One step of the background re-encryption, in one transaction that locks
 * the keyring row (so steps, activations and registrations never overlap)
 * and the rows it re-seals (so a tenant change waits for it, or it for the
 * change): up to `batch` rows of the current table whose values are not
 * sealed under the active key are opened and sealed again under it; the
 * position is stored in the same transaction, so a pass interrupted anywhere
 * resumes after the last committed batch, on whichever replica holds the
 * lease next. At the end of a pass the counts are taken again: values
 * sealed meanwhile by a replica that had not yet seen the activation start
 * another pass.
 */
export function reencryptStep(o: ReencryptOptions): Promise<StepResult> {
  return o.db.transaction(async (tx): Promise<StepResult> => {
    const row = await keyringStore.row(tx, true);
    const target = row.activeKeyId ?? LEGACY_KEY_ID;
    if (row.leaseHolder !== o.holder || !o.keyring.has(target)) return { kind: 'idle' };
    let pass: PassState = row.pass;
    if (pass.target !== target || pass.table === null) {
      if (pass.target === target) {
        const counts = await keyringStore.counts(tx, row);
        const left = Object.entries(counts).reduce((n, [id, c]) => (id === target ? n : n + c), 0);
        const hashKeyToSeal = row.hostSyncHashKey === null && target !== LEGACY_KEY_ID;
        if (left === 0 && !hashKeyToSeal) {
          // A registry still sealing with an older key may write one more value under it: not done until none does.
          if ((await keyringStore.holders(tx, o.holderExpiryMs)).some((h) => h.sealing !== target)) return { kind: 'idle' };
          await keyringStore.savePass(tx, pass, row.hostSyncHashKey, true);
          return { kind: 'done', newlyDone: row.doneAt === null };
        }
      }
      pass = { target, table: STEPS[0]!, after: null, startedAt: new Date(), reencrypted: pass.target === target ? pass.reencrypted : 0 };
    }
    let hashKey = row.hostSyncHashKey;
    let changed = 0;
    if (pass.table === HASH_KEY_STEP) {
      if (hashKey === null ? target !== LEGACY_KEY_ID : sealedKeyId(hashKey) !== target) {
        hashKey = o.keyring.seal(o.hostSyncHashKey.toString('base64'), HASH_KEY_AAD, target);
        changed = 1;
      }
      pass = { ...pass, table: null, after: null };
    } else {
      const table = SEALED_TABLES.find((t) => t.table === pass.table);
      if (!table) throw new Error(`unknown re-encryption step ${pass.table}`);
      const { values, last } = await reencryptRows(tx, table, o.keyring, target, pass.after, o.batch);
      changed = values;
      const next = STEPS[STEPS.indexOf(table.table) + 1]!;
      pass = last === undefined ? { ...pass, table: next, after: null } : { ...pass, after: last };
    }
    pass = { ...pass, reencrypted: pass.reencrypted + changed };
    await keyringStore.savePass(tx, pass, hashKey, false);
    return { kind: 'progress', reencrypted: changed };
  });
}

/**
 * Re-seals up to `batch` rows of `t` after `after` whose values are not
 * under `target`. `last`: the last row's key while a full batch came back
 * (the table may have more), else undefined (the table is finished).
 */
async function reencryptRows(tx: Queryable, t: SealedTable, keyring: Keyring, target: string, after: string | null, batch: number): Promise<{ values: number; last: string | undefined }> {
  const prefix = sealedPrefix(target);
  const stale = t.columns.map((c) => `(${c.column} IS NOT NULL AND NOT starts_with(${c.column}, $1))`).join(' OR ');
  const params: unknown[] = [prefix, batch];
  if (after !== null) params.push(after);
  const rows = await tx.query(
    `SELECT ${[t.key, ...t.extra, ...t.columns.map((c) => c.column)].join(', ')} FROM ${t.table}
      WHERE (${stale})${after !== null ? ` AND ${t.key} > $3::uuid` : ''} ORDER BY ${t.key} LIMIT $2 FOR UPDATE`,
    params,
  );
  let values = 0;
  for (const r of rows) {
    const resealed = t.columns.map((c) => {
      const v = r[c.column] as string | null;
      if (v === null || v.startsWith(prefix)) return v;
      values++;
      const aad = c.aad(r);
      return keyring.seal(keyring.open(v, aad), aad, target);
    });
    await tx.query(`UPDATE ${t.table} SET ${t.columns.map((c, i) => `${c.column} = $${i + 2}`).join(', ')} WHERE ${t.key} = $1`, [r[t.key], ...resealed]);
  }
  return { values, last: rows.length === batch ? String(rows[rows.length - 1]![t.key]) : undefined };
}
