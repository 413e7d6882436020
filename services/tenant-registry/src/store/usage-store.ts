import { isCanonicalUuid, systemClock, type Clock, type UsageRecord } from '@service-relay/core';
import type { Db, Queryable } from '../db/db';

/**
 * The counters of one tenant in one UTC hour, as one instance counted them:
 * the meter's record (packages/core usage-meter) without its tenant and hour.
 * `peakConnections` is that instance's peak within the hour.
 */
export type UsageCounts = Omit<UsageRecord, 'tenantId' | 'hourMs'>;

/** One flush row: exactly what an instance's meter cut (hourMs: the start of the UTC hour). */
export type UsageFlushRow = UsageRecord;

/** One instance's flush: applied once per id, however often it is retried. */
export interface UsageFlush {
  /** `<instance id>:<sequence>`, unique per flush. */
  flushId: string;
  instanceId: string;
  rows: UsageFlushRow[];
}

export type Granularity = 'hour' | 'day';

/** A bucket of a tenant's usage (an hour, or a UTC day summed from its hours; peak: the highest hour). */
export interface UsageBucket extends UsageCounts {
  startMs: number;
}

/** What the all-tenants list sorts by (descending, then tenant id ascending). */
export const USAGE_SORTS = ['published', 'deliveries', 'bytes_in', 'bytes_out', 'peak_connections', 'connection_minutes', 'refusals'] as const;
export type UsageSort = (typeof USAGE_SORTS)[number];

const SORT_SQL: Record<UsageSort, string> = {
  published: 'sum(published_rest + published_ws + published_host)',
  deliveries: 'sum(deliveries)',
  bytes_in: 'sum(bytes_in)',
  bytes_out: 'sum(bytes_out)',
  peak_connections: 'max(peak_connections)',
  connection_minutes: 'sum(connection_ms)',
  refusals: 'sum(refusals)',
};

export interface UsageListPosition {
  value: number;
  tenantId: string;
}

export interface TenantUsageTotals {
  tenantId: string;
  totals: UsageCounts;
  buckets: UsageBucket[];
}

const HOUR_MS = 3_600_000;
/** Applied flush ids are kept this long: a flush is retried for minutes, never days. */
export const FLUSH_ID_KEEP_MS = 2 * 86_400_000;
const FLUSH_ID = /^[A-Za-z0-9_.:-]{1,200}$/;
const LIMIT_NAME = /^[a-z0-9_]{1,64}$/;

type Num = string | number;
interface HourRow {
  tenant_id: string;
  hour: Date | string;
  published_rest: Num;
  published_ws: Num;
  published_host: Num;
  deliveries: Num;
  bytes_in: Num;
  bytes_out: Num;
  peak_connections: Num;
  connection_ms: Num;
}

/**
 * Usage per tenant and UTC hour (migration 010). Written only by flushes
 * (applyFlush: idempotent by flush id), read by the admin API, pruned by
 * retention, and purged per tenant by tenant deletion.
 */
export class UsageStore {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock = systemClock,
  ) {}

  /** A flush well-formed enough to store; the reason otherwise (the gRPC call answers invalid). */
  static problem(flush: UsageFlush): string | undefined {
    if (!FLUSH_ID.test(flush.flushId) || !FLUSH_ID.test(flush.instanceId)) return 'malformed flush or instance id';
    if (flush.rows.length > 100_000) return 'too many rows';
    for (const r of flush.rows) {
      if (!isCanonicalUuid(r.tenantId)) return 'malformed tenant id';
      if (!Number.isSafeInteger(r.hourMs) || r.hourMs % HOUR_MS !== 0) return 'hour not on an hour';
      for (const v of [r.publishedRest, r.publishedWs, r.publishedHost, r.deliveries, r.bytesIn, r.bytesOut, r.peakConnections, r.connectionMs]) {
        if (!Number.isSafeInteger(v) || v < 0) return 'counts are non-negative integers';
      }
      for (const [name, n] of Object.entries(r.refusals)) if (!LIMIT_NAME.test(name) || !Number.isSafeInteger(n) || n < 0) return 'malformed refusal';
    }
    return undefined;
  }

  /**
   * Adds the flush's counts in one transaction with its id: 'applied', or
   * 'duplicate' (already applied, nothing added). Rows of one tenant and hour
   * are merged first (peaks by max).
   */
  applyFlush(flush: UsageFlush): Promise<'applied' | 'duplicate'> {
    const rows = mergeRows(flush.rows);
    return this.db.transaction(async (tx) => {
      const now = new Date(this.clock.now()).toISOString();
      const fresh = await tx.query('INSERT INTO usage_flushes (flush_id, applied_at) VALUES ($1, $2) ON CONFLICT (flush_id) DO NOTHING RETURNING flush_id', [flush.flushId, now]);
      if (fresh.length === 0) return 'duplicate';
      // Counts an instance flushes after a tenant's deletion (its last connections' time, say) would bring purged usage back.
      // The tenants' rows are read FOR KEY SHARE (in id order) and held to commit: a deletion in flight (FOR UPDATE) is
      // waited for and then seen, and one that starts later waits for this flush and purges its rows. A plain read
      // lost that race on PostgreSQL: a deletion committed between it and the insert left a deleted tenant's rows behind.
      const ids = [...new Set(rows.map((r) => r.tenantId))].sort();
      const gone =
        ids.length === 0
          ? []
          : (await tx.query<{ tenant_id: string; deleted_at: unknown }>('SELECT tenant_id, deleted_at FROM tenants WHERE tenant_id = ANY($1::uuid[]) ORDER BY tenant_id FOR KEY SHARE', [ids])).filter(
              (t) => t.deleted_at !== null && t.deleted_at !== undefined,
            );
      const live = gone.length === 0 ? rows : rows.filter((r) => !gone.some((g) => g.tenant_id === r.tenantId));
      if (live.length === 0) return 'applied';
      await addCounts(tx, flush.instanceId, live);
      return 'applied';
    });
  }

  /** A tenant's buckets in [fromMs, toMs), oldest first; only buckets with data. */
  async tenantUsage(tenantId: string, fromMs: number, toMs: number, granularity: Granularity): Promise<UsageBucket[]> {
    if (!isCanonicalUuid(tenantId)) return [];
    return (await this.bucketsOf([tenantId], fromMs, toMs, granularity)).get(tenantId) ?? [];
  }

  /** Every tenant with usage in [fromMs, toMs), by `sort` descending then tenant id, `limit` a page, with their buckets. */
  async listUsage(
    fromMs: number,
    toMs: number,
    granularity: Granularity,
    sort: UsageSort,
    limit: number,
    after: UsageListPosition | undefined,
  ): Promise<{ tenants: TenantUsageTotals[]; next: UsageListPosition | undefined }> {
    const expr = SORT_SQL[sort];
    const params: unknown[] = [new Date(fromMs).toISOString(), new Date(toMs).toISOString(), limit + 1];
    let where = '';
    if (after) {
      params.push(after.value, after.tenantId);
      where = 'WHERE v < $4 OR (v = $4 AND tenant_id > $5)';
    }
    const rows = await this.db.query<{ tenant_id: string; v: Num }>(
      `WITH t AS (SELECT tenant_id, ${expr} AS v FROM tenant_usage WHERE hour >= $1 AND hour < $2 GROUP BY tenant_id)
       SELECT tenant_id, v FROM t ${where} ORDER BY v DESC, tenant_id ASC LIMIT $3`,
      params,
    );
    const page = rows.slice(0, limit);
    const ids = page.map((r) => r.tenant_id);
    const buckets = await this.bucketsOf(ids, fromMs, toMs, granularity);
    const tenants = ids.map((tenantId) => {
      const b = buckets.get(tenantId) ?? [];
      return { tenantId, totals: totalsOf(b), buckets: b };
    });
    const last = page[page.length - 1];
    return { tenants, next: rows.length > limit && last ? { value: Number(last.v), tenantId: last.tenant_id } : undefined };
  }

  /** Drops usage of hours before `keepMs` ago, and flush ids older than FLUSH_ID_KEEP_MS; the rows deleted. */
  async prune(keepMs: number): Promise<number> {
    const cutoff = new Date(this.clock.now() - keepMs).toISOString();
    const flushCutoff = new Date(this.clock.now() - FLUSH_ID_KEEP_MS).toISOString();
    return this.db.transaction(async (tx) => {
      let n = 0;
      for (const table of ['tenant_usage', 'tenant_usage_peaks', 'tenant_usage_refusals']) {
        n += await countDeleted(tx, `DELETE FROM ${table} WHERE hour < $1`, [cutoff]);
      }
      await countDeleted(tx, 'DELETE FROM usage_flushes WHERE applied_at < $1', [flushCutoff]);
      return n;
    });
  }

  /**
   * Deletes every usage row of a tenant (tenant deletion, unless it keeps
   * usage). Takes a transaction so it can commit with the deletion itself.
   */
  static async purgeTenantUsage(tx: Queryable, tenantId: string): Promise<number> {
    if (!isCanonicalUuid(tenantId)) return 0;
    let n = 0;
    for (const table of ['tenant_usage', 'tenant_usage_peaks', 'tenant_usage_refusals']) n += await countDeleted(tx, `DELETE FROM ${table} WHERE tenant_id = $1`, [tenantId]);
    return n;
  }

  purgeTenantUsage(tenantId: string): Promise<number> {
    return this.db.transaction((tx) => UsageStore.purgeTenantUsage(tx, tenantId));
  }

  private async bucketsOf(tenantIds: string[], fromMs: number, toMs: number, granularity: Granularity): Promise<Map<string, UsageBucket[]>> {
    const out = new Map<string, UsageBucket[]>();
    if (tenantIds.length === 0) return out;
    const range = [tenantIds, new Date(fromMs).toISOString(), new Date(toMs).toISOString()];
    const hours = await this.db.query<HourRow>(
      `SELECT tenant_id, hour, published_rest, published_ws, published_host, deliveries, bytes_in, bytes_out, peak_connections, connection_ms
       FROM tenant_usage WHERE tenant_id = ANY($1::uuid[]) AND hour >= $2 AND hour < $3 ORDER BY tenant_id, hour`,
      range,
    );
    const refusals = await this.db.query<{ tenant_id: string; hour: Date | string; limit_name: string; count: Num }>(
      'SELECT tenant_id, hour, limit_name, count FROM tenant_usage_refusals WHERE tenant_id = ANY($1::uuid[]) AND hour >= $2 AND hour < $3',
      range,
    );
    const byKey = new Map<string, Record<string, number>>();
    for (const r of refusals) {
      const key = `${r.tenant_id}|${new Date(r.hour).getTime()}`;
      const m = byKey.get(key) ?? {};
      m[r.limit_name] = Number(r.count);
      byKey.set(key, m);
    }
    for (const h of hours) {
      const hourMs = new Date(h.hour).getTime();
      const startMs = granularity === 'day' ? hourMs - (hourMs % 86_400_000) : hourMs;
      const counts = countsOf(h, byKey.get(`${h.tenant_id}|${hourMs}`) ?? {});
      let list = out.get(h.tenant_id);
      if (!list) out.set(h.tenant_id, (list = []));
      const lastBucket = list[list.length - 1];
      if (lastBucket && lastBucket.startMs === startMs) addInto(lastBucket, counts);
      else list.push({ startMs, ...counts });
    }
    return out;
  }
}

function countsOf(h: HourRow, refusals: Record<string, number>): UsageCounts {
  return {
    publishedRest: Number(h.published_rest),
    publishedWs: Number(h.published_ws),
    publishedHost: Number(h.published_host),
    deliveries: Number(h.deliveries),
    bytesIn: Number(h.bytes_in),
    bytesOut: Number(h.bytes_out),
    peakConnections: Number(h.peak_connections),
    connectionMs: Number(h.connection_ms),
    refusals,
  };
}

export function emptyCounts(): UsageCounts {
  return { publishedRest: 0, publishedWs: 0, publishedHost: 0, deliveries: 0, bytesIn: 0, bytesOut: 0, peakConnections: 0, connectionMs: 0, refusals: {} };
}

/** Sums into `into`; the peak is the larger of the two (a day's peak is its busiest hour's). */
export function addInto(into: UsageCounts, c: UsageCounts): void {
  into.publishedRest += c.publishedRest;
  into.publishedWs += c.publishedWs;
  into.publishedHost += c.publishedHost;
  into.deliveries += c.deliveries;
  into.bytesIn += c.bytesIn;
  into.bytesOut += c.bytesOut;
  into.peakConnections = Math.max(into.peakConnections, c.peakConnections);
  into.connectionMs += c.connectionMs;
  const refusals = { ...into.refusals };
  for (const [k, n] of Object.entries(c.refusals)) refusals[k] = (refusals[k] ?? 0) + n;
  into.refusals = refusals;
}

function totalsOf(buckets: UsageBucket[]): UsageCounts {
  const t = emptyCounts();
  for (const b of buckets) addInto(t, b);
  return t;
}

function mergeRows(rows: UsageFlushRow[]): UsageFlushRow[] {
  const byKey = new Map<string, UsageFlushRow>();
  for (const r of rows) {
    const key = `${r.tenantId}|${r.hourMs}`;
    const seen = byKey.get(key);
    if (seen) addInto(seen, r);
    else byKey.set(key, { ...r, refusals: { ...r.refusals } });
  }
  // One order for every flush: two instances' flushes touching the same rows lock them in the same order (no deadlock).
  return [...byKey.values()].sort((x, y) => (x.tenantId < y.tenantId ? -1 : x.tenantId > y.tenantId ? 1 : x.hourMs - y.hourMs));
}

async function countDeleted(tx: Queryable, sql: string, params: unknown[]): Promise<number> {
  const rows = await tx.query<{ n: Num }>(`WITH d AS (${sql} RETURNING 1) SELECT count(*) AS n FROM d`, params);
  return Number(rows[0]?.n ?? 0);
}

/** The increments of one flush: counters, this instance's peaks, refusals, then the hour's summed peak. */
async function addCounts(tx: Queryable, instanceId: string, rows: UsageFlushRow[]): Promise<void> {
  const col = <K extends keyof UsageFlushRow>(k: K) => rows.map((r) => r[k]);
  const tenants = col('tenantId');
  const hours = rows.map((r) => new Date(r.hourMs).toISOString());
  const refusalTotals = rows.map((r) => Object.values(r.refusals).reduce((a, b) => a + b, 0));
  await tx.query(
    `INSERT INTO tenant_usage (tenant_id, hour, published_rest, published_ws, published_host, deliveries, bytes_in, bytes_out, connection_ms, refusals)
     SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[])
     ON CONFLICT (tenant_id, hour) DO UPDATE SET
       published_rest = tenant_usage.published_rest + excluded.published_rest,
       published_ws = tenant_usage.published_ws + excluded.published_ws,
       published_host = tenant_usage.published_host + excluded.published_host,
       deliveries = tenant_usage.deliveries + excluded.deliveries,
       bytes_in = tenant_usage.bytes_in + excluded.bytes_in,
       bytes_out = tenant_usage.bytes_out + excluded.bytes_out,
       connection_ms = tenant_usage.connection_ms + excluded.connection_ms,
       refusals = tenant_usage.refusals + excluded.refusals`,
    [tenants, hours, col('publishedRest'), col('publishedWs'), col('publishedHost'), col('deliveries'), col('bytesIn'), col('bytesOut'), col('connectionMs'), refusalTotals],
  );
  const peaks = rows.filter((r) => r.peakConnections > 0);
  if (peaks.length > 0) {
    const pt = peaks.map((r) => r.tenantId);
    const ph = peaks.map((r) => new Date(r.hourMs).toISOString());
    await tx.query(
      `INSERT INTO tenant_usage_peaks (tenant_id, hour, instance_id, peak)
       SELECT t, h, $3, p FROM unnest($1::uuid[], $2::timestamptz[], $4::bigint[]) AS u(t, h, p)
       ON CONFLICT (tenant_id, hour, instance_id) DO UPDATE SET peak = GREATEST(tenant_usage_peaks.peak, excluded.peak)`,
      [pt, ph, instanceId, peaks.map((r) => r.peakConnections)],
    );
    await tx.query(
      `UPDATE tenant_usage u SET peak_connections = (SELECT sum(peak) FROM tenant_usage_peaks p WHERE p.tenant_id = u.tenant_id AND p.hour = u.hour)
       FROM unnest($1::uuid[], $2::timestamptz[]) AS k(t, h) WHERE u.tenant_id = k.t AND u.hour = k.h`,
      [pt, ph],
    );
  }
  const rt: string[] = [];
  const rh: string[] = [];
  const rn: string[] = [];
  const rc: number[] = [];
  for (const r of rows) {
    for (const [name, n] of Object.entries(r.refusals)) {
      if (n === 0) continue;
      rt.push(r.tenantId);
      rh.push(new Date(r.hourMs).toISOString());
      rn.push(name);
      rc.push(n);
    }
  }
  if (rt.length > 0) {
    await tx.query(
      `INSERT INTO tenant_usage_refusals (tenant_id, hour, limit_name, count)
       SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::bigint[])
       ON CONFLICT (tenant_id, hour, limit_name) DO UPDATE SET count = tenant_usage_refusals.count + excluded.count`,
      [rt, rh, rn, rc],
    );
  }
}
