import type { Db, Queryable } from '../db/db';
import type { TenantChangeEvent } from '../tenants/tenant';

export interface FeedChange {
  seq: number;
  tenantId: string;
  kind: string;
  version: number;
  revokedKeyVersions: number[];
  detail?: Readonly<Record<string, unknown>>;
}

export interface FeedPage {
  latestSeq: number;
  changes: FeedChange[];
  /** The changes after the asked position are no longer all kept, or the sequence is behind it. */
  reset: boolean;
}

export interface PendingConsumer {
  consumerId: string;
  kind: string;
  appliedSeq: number;
}

/** The most changes one answer carries. */
export const MAX_FEED_PAGE = 1000;

const RECORD_SQL = `INSERT INTO feed_consumers (consumer_id, kind, applied_seq, lease_ms, seen_at, current_at)
       SELECT $1, $2, $3, $4, now(), CASE WHEN $3 >= s.seq THEN now() END FROM feed_state s WHERE s.id = 1
       ON CONFLICT (consumer_id) DO UPDATE SET
         applied_seq = excluded.applied_seq, lease_ms = excluded.lease_ms, seen_at = excluded.seen_at,
         current_at = COALESCE(excluded.current_at, feed_consumers.current_at)`;

/** The latest sequence and the changes after the parameter `after` (at most `limit` of them), in one snapshot. */
const pageSql = (after: string, limit: string) => `SELECT s.seq AS latest, s.pruned_through, c.seq, c.tenant_id, c.kind, c.version, c.revoked_key_versions, c.detail
         FROM feed_state s
         LEFT JOIN LATERAL (SELECT * FROM tenant_changes WHERE seq > ${after} ORDER BY seq LIMIT ${limit}) c ON true
        WHERE s.id = 1
        ORDER BY c.seq`;
const PAGE_SQL = pageSql('$1', '$2');
/** A data-modifying WITH runs once and to completion whether or not the query reads it. */
const RECORD_AND_PAGE_SQL = `WITH recorded AS (${RECORD_SQL}) ${pageSql('$5', '$6')}`;

function pageParams(after: number, limit: number): [number, number] {
  return [Math.max(after, 0), after < 0 ? 0 : Math.min(Math.max(limit, 1), MAX_FEED_PAGE)];
}

function pageOf(rows: Array<Record<string, unknown>>, after: number): FeedPage {
  const first = rows[0]!;
  const latestSeq = Number(first.latest);
  const prunedThrough = Number(first.pruned_through);
  if (after < 0) return { latestSeq, changes: [], reset: false };
  if (after > latestSeq || after < prunedThrough) return { latestSeq, changes: [], reset: true };
  const changes = rows
    .filter((r) => r.seq !== null && r.seq !== undefined)
    .map((r) => ({
      seq: Number(r.seq),
      tenantId: String(r.tenant_id),
      kind: String(r.kind),
      version: Number(r.version),
      revokedKeyVersions: (r.revoked_key_versions as Array<string | number>).map(Number),
      ...(r.detail !== null && r.detail !== undefined && { detail: (typeof r.detail === 'string' ? JSON.parse(r.detail) : r.detail) as Record<string, unknown> }),
    }));
  return { latestSeq, changes, reset: false };
}

/**
 * The tenant feed's tables (migrations/002_tenant_feed.sql): the outbox of
 * tenant changes, and the progress every consumer reports. Timing questions
 * ("is this consumer's lease still running?") are asked of the database's
 * clock so that every registry replica gets the same answer.
 */
export class FeedStore {
  constructor(private readonly db: Db) {}

  /** Inside the transaction that commits the change; returns its sequence. */
  async record(tx: Queryable, tenantId: string, e: TenantChangeEvent): Promise<number> {
    const [row] = await tx.query<{ seq: string | number }>('UPDATE feed_state SET seq = seq + 1 WHERE id = 1 RETURNING seq');
    const seq = Number(row!.seq);
    await tx.query('INSERT INTO tenant_changes (seq, tenant_id, kind, version, revoked_key_versions, detail) VALUES ($1, $2, $3, $4, $5, $6)', [
      seq,
      tenantId,
      e.kind,
      e.version,
      e.revokedKeyVersions,
      e.detail === undefined ? null : JSON.stringify(e.detail),
    ]);
    return seq;
  }

  async latestSeq(): Promise<number> {
    const [row] = await this.db.query<{ seq: string | number }>('SELECT seq FROM feed_state WHERE id = 1');
    return Number(row!.seq);
  }

  /** Changes after `after` (-1: none, just the position), read in one snapshot with the latest sequence. */
  async changesSince(after: number, limit: number): Promise<FeedPage> {
    return pageOf(await this.db.query<Record<string, unknown>>(PAGE_SQL, pageParams(after, limit)), after);
  }

  /** What a consumer reported. `current_at` moves only when it had applied everything committed. */
  async recordConsumer(consumerId: string, kind: string, appliedSeq: number, leaseMs: number): Promise<void> {
    await this.db.query(RECORD_SQL, [consumerId, kind, appliedSeq, leaseMs]);
  }

  /**
   * A consumer's poll: `recordConsumer` and then `changesSince(appliedSeq)`
   * in one statement, so one snapshot and one round trip. Every consumer
   * polls every quarter lease (2 a second by default), so this is most of
   * what an idle deployment asks of PostgreSQL. On the embedded default
   * (PGlite runs in the event loop's thread) two statements were 40% of an
   * idle `npm start`'s CPU; one cut its busy time by a fifth (CPU profiles
   * of 30 idle seconds: 1,154 and 1,175 busy samples before, 876 and 916
   * after).
   */
  async recordAndRead(consumerId: string, kind: string, appliedSeq: number, leaseMs: number, limit: number): Promise<FeedPage> {
    return pageOf(await this.db.query<Record<string, unknown>>(RECORD_AND_PAGE_SQL, [consumerId, kind, appliedSeq, leaseMs, ...pageParams(appliedSeq, limit)]), appliedSeq);
  }

  /**
   * Consumers that have not applied `seq` and may still trust their caches:
   * their lease, counted from the last request at which they were current,
   * has not run out on the database's clock (plus `marginMs`).
   */
  async pendingConsumers(seq: number, marginMs: number): Promise<PendingConsumer[]> {
    const rows = await this.db.query<{ consumer_id: string; kind: string; applied_seq: string | number }>(
      `SELECT consumer_id, kind, applied_seq FROM feed_consumers
        WHERE applied_seq < $1 AND current_at IS NOT NULL
          AND current_at + (lease_ms + $2) * interval '1 millisecond' > now()
        ORDER BY consumer_id`,
      [seq, marginMs],
    );
    return rows.map((r) => ({ consumerId: r.consumer_id, kind: r.kind, appliedSeq: Number(r.applied_seq) }));
  }

  /** Every consumer heard from within `withinMs`, for the operator's view. */
  async consumers(withinMs: number): Promise<Array<PendingConsumer & { current: boolean; lagMs: number }>> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT c.consumer_id, c.kind, c.applied_seq, c.applied_seq >= s.seq AS current,
              extract(epoch from (now() - c.seen_at)) * 1000 AS lag_ms
         FROM feed_consumers c, feed_state s
        WHERE s.id = 1 AND c.seen_at > now() - $1 * interval '1 millisecond'
        ORDER BY c.kind, c.consumer_id`,
      [withinMs],
    );
    return rows.map((r) => ({ consumerId: String(r.consumer_id), kind: String(r.kind), appliedSeq: Number(r.applied_seq), current: Boolean(r.current), lagMs: Math.round(Number(r.lag_ms)) }));
  }

  /** Drops outbox rows older than `keepMs` (a consumer behind them resets) and consumers silent that long. */
  async prune(keepMs: number): Promise<number> {
    return this.db.transaction(async (tx) => {
      const [row] = await tx.query<{ through: string | number | null }>(
        `SELECT max(seq) AS through FROM tenant_changes WHERE committed_at < now() - $1 * interval '1 millisecond'`,
        [keepMs],
      );
      const through = row?.through === null || row?.through === undefined ? 0 : Number(row.through);
      if (through > 0) {
        await tx.query('UPDATE feed_state SET pruned_through = GREATEST(pruned_through, $1) WHERE id = 1', [through]);
        await tx.query('DELETE FROM tenant_changes WHERE seq <= $1', [through]);
      }
      await tx.query(`DELETE FROM feed_consumers WHERE seen_at < now() - $1 * interval '1 millisecond'`, [keepMs]);
      return through;
    });
  }
}
