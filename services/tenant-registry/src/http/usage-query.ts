import { isCanonicalUuid, RelayError } from '@service-relay/core';
import { USAGE_SORTS, type Granularity, type UsageBucket, type UsageCounts, type UsageListPosition, type UsageSort } from '../store/usage-store';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** The widest window one read covers: 31 days of hours, 400 days of days. */
const MAX_RANGE_MS: Record<Granularity, number> = { hour: 31 * DAY_MS, day: 400 * DAY_MS };

export interface UsageWindow {
  fromMs: number;
  toMs: number;
  granularity: Granularity;
}

/** A query the usage reads refuse: 400 invalid_query with this problem. */
export class UsageQueryProblem extends Error {}

/**
 * `from`, `to` (RFC 3339, `to` exclusive; default the last 24 hours) and
 * `granularity` (hour, the default, or day). The window widens to whole
 * buckets: `from` down, `to` up, to the hour or UTC day.
 */
export function parseUsageWindow(query: Record<string, unknown>, nowMs: number): UsageWindow {
  const granularity = query.granularity ?? 'hour';
  if (granularity !== 'hour' && granularity !== 'day') throw new UsageQueryProblem('granularity is hour or day');
  const unit = granularity === 'hour' ? HOUR_MS : DAY_MS;
  const to = query.to === undefined ? nowMs : parseTimestamp(query.to, 'to');
  const from = query.from === undefined ? to - DAY_MS : parseTimestamp(query.from, 'from');
  const fromMs = Math.floor(from / unit) * unit;
  const toMs = Math.ceil(to / unit) * unit;
  if (!(toMs > fromMs) || !(to > from)) throw new UsageQueryProblem('from must be before to');
  if (toMs - fromMs > MAX_RANGE_MS[granularity]) throw new UsageQueryProblem(`at most ${MAX_RANGE_MS[granularity] / DAY_MS} days at granularity ${granularity}`);
  return { fromMs, toMs, granularity };
}

/** An RFC 3339 timestamp with a zone, in ms; UsageQueryProblem naming `name` otherwise (also the audit log's since/until). */
export function parseTimestamp(raw: unknown, name: string): number {
  // RFC 3339 with a zone (Z or an offset): a bare date-time would be read in the server's zone.
  if (typeof raw !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i.test(raw)) {
    throw new UsageQueryProblem(`${name} is an RFC 3339 timestamp with a zone, e.g. 2030-01-01T00:00:00Z`);
  }
  const ms = Date.parse(raw);
  if (Number.isNaN(ms)) throw new UsageQueryProblem(`${name} is not a valid timestamp`);
  return ms;
}

export function parseUsageSort(raw: unknown): UsageSort {
  if (raw === undefined) return 'published';
  if (typeof raw !== 'string' || !(USAGE_SORTS as readonly string[]).includes(raw)) throw new UsageQueryProblem(`sort is one of ${USAGE_SORTS.join(', ')}`);
  return raw as UsageSort;
}

/** next_cursor of the usage list: base64url of [sort, value, tenant id]; a cursor of another sort is refused. */
export function encodeUsageCursor(sort: UsageSort, p: UsageListPosition): string {
  return Buffer.from(JSON.stringify([sort, p.value, p.tenantId])).toString('base64url');
}

export function decodeUsageCursor(sort: UsageSort, cursor: unknown): UsageListPosition | undefined {
  if (cursor === undefined) return undefined;
  if (typeof cursor !== 'string' || !/^[A-Za-z0-9_-]{1,300}$/.test(cursor)) throw new RelayError('invalid_query');
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new RelayError('invalid_query');
  }
  if (!Array.isArray(v) || v.length !== 3 || v[0] !== sort || !Number.isSafeInteger(v[1]) || !isCanonicalUuid(v[2])) throw new UsageQueryProblem('cursor is not one of this sort');
  return { value: v[1] as number, tenantId: v[2] as string };
}

/** The API's view of counts (docs/API.md "Usage"). */
export function usageCountsView(c: UsageCounts): Record<string, unknown> {
  return {
    published: { rest: c.publishedRest, ws: c.publishedWs, host: c.publishedHost, total: c.publishedRest + c.publishedWs + c.publishedHost },
    deliveries: c.deliveries,
    bytes_in: c.bytesIn,
    bytes_out: c.bytesOut,
    peak_connections: c.peakConnections,
    connection_minutes: Math.round(c.connectionMs / 60) / 1000,
    refusals: c.refusals,
  };
}

export function usageBucketView(b: UsageBucket): Record<string, unknown> {
  return { start: new Date(b.startMs).toISOString(), ...usageCountsView(b) };
}

export function windowView(w: UsageWindow): Record<string, unknown> {
  return { from: new Date(w.fromMs).toISOString(), to: new Date(w.toMs).toISOString(), granularity: w.granularity };
}
