import type { Queryable } from '../db/db';

/** One admin call, as recorded: who, what, on which tenant, with what outcome. Never a secret. */
export interface AuditEntry {
  /** "current:<fp>", "next:<fp>" (admin-tokens.ts) or "unauthenticated". */
  actor: string;
  /** The admin route's name, or "unknown". */
  action: string;
  method: string;
  tenantId: string | null;
  status: number;
  /** The answer's error code; null on success. */
  error: string | null;
  requestId: string;
  clientAddress: string | null;
  /** Failed authentications left out (rate limit) since the previous unauthenticated row. */
  suppressed: number;
}

export interface AuditRecord extends AuditEntry {
  id: number;
  at: Date;
}

/** Which rows a listing returns (every given part must match). */
export interface AuditFilter {
  tenantId?: string | undefined;
  /** Any of these actions. */
  actions?: readonly string[] | undefined;
  /** `ok` (status below 400), `refused` (4xx) or `failed` (5xx). */
  outcome?: AuditOutcome | undefined;
  /** Answered at or after `since`, before `until`. */
  since?: Date | undefined;
  until?: Date | undefined;
}

export const AUDIT_OUTCOMES = ['ok', 'refused', 'failed'] as const;
export type AuditOutcome = (typeof AUDIT_OUTCOMES)[number];
const OUTCOME_SQL: Record<AuditOutcome, string> = { ok: 'status < 400', refused: 'status >= 400 AND status < 500', failed: 'status >= 500' };

export interface AuditPage {
  records: AuditRecord[];
  /** The id to continue below, or null when this was the oldest. */
  next: number | null;
}

const COLUMNS = 'id, at, actor, action, method, tenant_id, status, error, request_id, client_address, suppressed';

/** The admin_audit_log table (migrations/003_audit_log.sql), the same SQL on PostgreSQL and PGlite. */
export class AuditStore {
  constructor(private readonly db: Queryable) {}

  async insert(e: AuditEntry): Promise<void> {
    await this.db.query(
      `INSERT INTO admin_audit_log (actor, action, method, tenant_id, status, error, request_id, client_address, suppressed)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [e.actor, e.action, e.method, e.tenantId, e.status, e.error, e.requestId, e.clientAddress, e.suppressed],
    );
  }

  /** Newest first (by id, the order rows were written), below `beforeId`, of the rows the filter matches. */
  async list(limit: number, beforeId?: number, filter: AuditFilter = {}): Promise<AuditPage> {
    const where: string[] = [];
    const params: unknown[] = [limit + 1];
    const add = (sql: (n: number) => string, value: unknown) => {
      params.push(value);
      where.push(sql(params.length));
    };
    if (beforeId !== undefined) add((n) => `id < $${n}`, beforeId);
    if (filter.tenantId !== undefined) add((n) => `tenant_id = $${n}::uuid`, filter.tenantId);
    if (filter.actions !== undefined && filter.actions.length > 0) add((n) => `action = ANY($${n}::text[])`, [...filter.actions]);
    if (filter.since !== undefined) add((n) => `at >= $${n}::timestamptz`, filter.since.toISOString());
    if (filter.until !== undefined) add((n) => `at < $${n}::timestamptz`, filter.until.toISOString());
    if (filter.outcome !== undefined) where.push(OUTCOME_SQL[filter.outcome]);
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT ${COLUMNS} FROM admin_audit_log ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $1`,
      params,
    );
    const records = rows.slice(0, limit).map(toRecord);
    const last = records[records.length - 1];
    return { records, next: rows.length > limit && last ? last.id : null };
  }

  /** Deletes rows older than `keepMs` on the database's clock; returns how many. */
  async prune(keepMs: number): Promise<number> {
    const [row] = await this.db.query<{ n: string | number }>(
      `WITH gone AS (DELETE FROM admin_audit_log WHERE at < now() - $1 * interval '1 millisecond' RETURNING 1) SELECT count(*) AS n FROM gone`,
      [keepMs],
    );
    return Number(row?.n ?? 0);
  }
}

function toRecord(r: Record<string, unknown>): AuditRecord {
  return {
    id: Number(r.id),
    at: r.at instanceof Date ? r.at : new Date(String(r.at)),
    actor: String(r.actor),
    action: String(r.action),
    method: String(r.method),
    tenantId: r.tenant_id === null || r.tenant_id === undefined ? null : String(r.tenant_id),
    status: Number(r.status),
    error: r.error === null || r.error === undefined ? null : String(r.error),
    requestId: String(r.request_id),
    clientAddress: r.client_address === null || r.client_address === undefined ? null : String(r.client_address),
    suppressed: Number(r.suppressed),
  };
}
