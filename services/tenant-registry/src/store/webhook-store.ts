import { isCanonicalUuid } from '@service-relay/core';
import { WEBHOOK_EVENT_TYPES } from '@service-relay/webhook-events';
import type { Db, Queryable } from '../db/db';
import type { CommittedChangeEvent, TenantChangeEvent } from '../tenants/tenant';
import type { FeedStore } from './feed-store';

/** At most this many endpoints per tenant. */
export const MAX_ENDPOINTS_PER_TENANT = 10;
/** Attempts kept per endpoint in its delivery log. */
const ATTEMPTS_KEPT = 100;

export interface WebhookEndpointRow {
  endpointId: string;
  tenantId: string;
  url: string;
  events: string[];
  enabled: boolean;
  /** Sealed (SECRETS_KEY). */
  secret: string;
  previousSecret: string | null;
  previousExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  failures: number;
  failingSince: Date | null;
  nextAttemptAt: Date | null;
}

export interface QueuedDelivery {
  seq: number;
  eventId: string;
  /** The event as sent (docs/PROTOCOL.md "Webhooks"). */
  event: Record<string, unknown>;
  createdAt: Date;
}

export interface AttemptRow {
  attemptedAt: Date;
  events: number;
  firstEventId: string | null;
  status: number | null;
  error: string | null;
  latencyMs: number;
  nextAttemptAt: Date | null;
}

/** An event read from the stream, with its public id and shape, to be routed to the endpoints that want it. */
export interface NewEvent {
  tenantId: string;
  type: string;
  eventId: string;
  event: Record<string, unknown>;
  createdAt: Date;
}

/** An endpoint the sender may send to now, with its next batch. */
export interface DueEndpoint extends WebhookEndpointRow {
  /** Queued events, counted up to the batch size. */
  queued: number;
  /** The batch's oldest event. */
  oldest: Date;
  batch: QueuedDelivery[];
}

/** The event types a tenant's enabled endpoints want (realtime records only these), with their version. */
export interface WebhookInterest {
  /** Sorted, each once; empty when no enabled endpoint wants anything. */
  events: string[];
  /** Per tenant, only ever growing; 0 while the set never changed. */
  version: number;
}

/** What TenantFeed.TenantWebhooks answers: the interest and, read in the same statement, the feed sequence. */
export interface WebhookInterestSnapshot extends WebhookInterest {
  asOfSeq: number;
}

/** An endpoint write and, when it moved the tenant's interest, the `webhooks` change it recorded. */
export interface EndpointChange<T> {
  result: T;
  change?: CommittedChangeEvent;
}

interface LockedTenant {
  version: string | number;
  webhooks_version: string | number;
}

/**
 * Webhook endpoints, their durable delivery queues and logs, the sender's
 * lease and stream position (migrations 013, 015). A write that changes which
 * event types the tenant's enabled endpoints want (create, delete, switch on
 * or off) locks the tenant row like every tenant mutation and records a
 * `webhooks` feed change carrying the new set, in its transaction: realtime
 * records a tenant's events only for those types, and the admin call waits
 * until every instance applied it.
 */
export class WebhookStore {
  constructor(
    private readonly db: Db,
    private readonly feed: FeedStore,
  ) {}

  /** Undefined when the tenant does not exist (or is deleted); 'too_many' past MAX_ENDPOINTS_PER_TENANT. */
  async create(row: { endpointId: string; tenantId: string; url: string; events: string[]; secret: string; now: Date }): Promise<EndpointChange<WebhookEndpointRow> | 'too_many' | undefined> {
    return this.db.transaction(async (tx) => {
      const tenant = await lockTenant(tx, row.tenantId);
      if (!tenant) return undefined;
      const [count] = await tx.query<{ n: string | number }>('SELECT count(*) AS n FROM webhook_endpoints WHERE tenant_id = $1', [row.tenantId]);
      if (Number(count!.n) >= MAX_ENDPOINTS_PER_TENANT) return 'too_many';
      const before = await interestOf(tx, row.tenantId);
      const [created] = await tx.query<Record<string, unknown>>(
        `INSERT INTO webhook_endpoints (endpoint_id, tenant_id, url, events, enabled, secret, created_at, updated_at)
         VALUES ($1, $2, $3, $4::jsonb, true, $5, $6, $6) RETURNING *`,
        [row.endpointId, row.tenantId, row.url, JSON.stringify(row.events), row.secret, row.now.toISOString()],
      );
      return this.withChange(tx, row.tenantId, tenant, before, toEndpoint(created!));
    });
  }

  /** The event types the tenant's enabled endpoints want, its version and the feed sequence, in one statement; undefined for no such tenant. */
  async interest(tenantId: string): Promise<WebhookInterestSnapshot | undefined> {
    if (!isCanonicalUuid(tenantId)) return undefined;
    const [row] = await this.db.query<{ webhooks_version: string | number; as_of_seq: string | number; events: unknown }>(
      `SELECT t.webhooks_version, (SELECT seq FROM feed_state WHERE id = 1) AS as_of_seq,
              (SELECT coalesce(jsonb_agg(e.events), '[]'::jsonb) FROM webhook_endpoints e WHERE e.tenant_id = t.tenant_id AND e.enabled) AS events
         FROM tenants t WHERE t.tenant_id = $1 AND t.deleted_at IS NULL`,
      [tenantId],
    );
    if (!row) return undefined;
    const lists = (typeof row.events === 'string' ? JSON.parse(row.events) : row.events) as string[][];
    return { events: unionOf(lists), version: Number(row.webhooks_version), asOfSeq: Number(row.as_of_seq) };
  }

  /** Records a `webhooks` change when the write moved the tenant's interest (inside its transaction, the tenant row locked). */
  private async withChange<T>(tx: Queryable, tenantId: string, tenant: LockedTenant, before: string[], result: T): Promise<EndpointChange<T>> {
    const after = await interestOf(tx, tenantId);
    if (after.join() === before.join()) return { result };
    const version = Number(tenant.webhooks_version) + 1;
    await tx.query('UPDATE tenants SET webhooks_version = $2 WHERE tenant_id = $1', [tenantId, version]);
    const event: TenantChangeEvent = { kind: 'webhooks', version: Number(tenant.version), revokedKeyVersions: [], detail: { webhook_events: after, webhooks_version: version } };
    const seq = await this.feed.record(tx, tenantId, event);
    return { result, change: { ...event, seq } };
  }

  async list(tenantId: string): Promise<WebhookEndpointRow[]> {
    return (await this.db.query<Record<string, unknown>>('SELECT * FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY created_at, endpoint_id', [tenantId])).map(toEndpoint);
  }

  async get(tenantId: string, endpointId: string): Promise<WebhookEndpointRow | undefined> {
    const [row] = await this.db.query<Record<string, unknown>>('SELECT * FROM webhook_endpoints WHERE tenant_id = $1 AND endpoint_id = $2', [tenantId, endpointId]);
    return row && toEndpoint(row);
  }

  /** Undefined: no such endpoint (or tenant). */
  async remove(tenantId: string, endpointId: string): Promise<EndpointChange<true> | undefined> {
    return this.db.transaction(async (tx) => {
      const tenant = await lockTenant(tx, tenantId);
      if (!tenant) return undefined;
      const before = await interestOf(tx, tenantId);
      const gone = await tx.query('DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND endpoint_id = $2 RETURNING 1', [tenantId, endpointId]);
      if (gone.length === 0) return undefined;
      return this.withChange(tx, tenantId, tenant, before, true as const);
    });
  }

  /** The on/off switch; switched on, a waiting retry is due at once. */
  async setEnabled(tenantId: string, endpointId: string, enabled: boolean, now: Date): Promise<EndpointChange<WebhookEndpointRow> | undefined> {
    return this.db.transaction(async (tx) => {
      const tenant = await lockTenant(tx, tenantId);
      if (!tenant) return undefined;
      const before = await interestOf(tx, tenantId);
      const [row] = await tx.query<Record<string, unknown>>(
        `UPDATE webhook_endpoints SET enabled = $3, updated_at = $4, next_attempt_at = CASE WHEN $3 THEN NULL ELSE next_attempt_at END
          WHERE tenant_id = $1 AND endpoint_id = $2 RETURNING *`,
        [tenantId, endpointId, enabled, now.toISOString()],
      );
      if (!row) return undefined;
      return this.withChange(tx, tenantId, tenant, before, toEndpoint(row));
    });
  }

  /** The new secret signs from now on; the old one is sent beside it until `previousUntil`. */
  async rotateSecret(tenantId: string, endpointId: string, sealed: (previous: string) => { secret: string; previous: string }, previousUntil: Date, now: Date): Promise<WebhookEndpointRow | undefined> {
    return this.db.transaction(async (tx) => {
      const [cur] = await tx.query<{ secret: string }>('SELECT secret FROM webhook_endpoints WHERE tenant_id = $1 AND endpoint_id = $2 FOR UPDATE', [tenantId, endpointId]);
      if (!cur) return undefined;
      const next = sealed(cur.secret);
      const [row] = await tx.query<Record<string, unknown>>(
        `UPDATE webhook_endpoints SET secret = $3, previous_secret = $4, previous_expires_at = $5, updated_at = $6
          WHERE endpoint_id = $2 AND tenant_id = $1 RETURNING *`,
        [tenantId, endpointId, next.secret, next.previous, previousUntil.toISOString(), now.toISOString()],
      );
      return toEndpoint(row!);
    });
  }

  /**
   * Stores what was read from the stream, one delivery per enabled endpoint
   * of the event's tenant that wants its type, and moves the stream position
   * from `from` (where the read started; undefined before the first) to
   * `to`, in one statement (atomic). The routing is a join in the database:
   * no endpoint rows travel. `unnest … WITH ORDINALITY` keeps the read's
   * order, so each endpoint's `seq` does too. Only when the position still
   * is `from`: a read whose storing answered late (the statement committed,
   * its caller had given up) and is read and stored again finds the position
   * moved and stores nothing (`stored: false`); its events already have
   * their ids, and a second copy under new ids would reach endpoints twice.
   * `routed`: events that went to at least one endpoint.
   */
  async route(events: readonly NewEvent[], from: string | undefined, to: string): Promise<{ routed: number; stored: boolean }> {
    const [row] = await this.db.query<{ routed: string | number; stored: boolean }>(
      `WITH d AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::timestamptz[]) WITH ORDINALITY AS d(tenant_id, type, event_id, event, created_at, n)),
            pos AS (INSERT INTO webhook_stream_position (id, last_id) VALUES (1, $6) ON CONFLICT (id) DO UPDATE SET last_id = excluded.last_id
                     WHERE webhook_stream_position.last_id IS NOT DISTINCT FROM $7::text RETURNING 1 AS moved),
            ins AS (INSERT INTO webhook_deliveries (endpoint_id, tenant_id, event_id, event, created_at)
                    SELECT e.endpoint_id, d.tenant_id, d.event_id, d.event::jsonb, d.created_at
                      FROM d JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND e.enabled AND e.events ? d.type
                     WHERE EXISTS (SELECT 1 FROM pos)
                     ORDER BY d.n, e.endpoint_id
                    RETURNING event_id)
       SELECT (SELECT count(DISTINCT event_id) FROM ins) AS routed, EXISTS (SELECT 1 FROM pos) AS stored`,
      [events.map((e) => e.tenantId), events.map((e) => e.type), events.map((e) => e.eventId), events.map((e) => JSON.stringify(e.event)), events.map((e) => e.createdAt.toISOString()), to, from ?? null],
    );
    return { routed: Number(row!.routed), stored: row!.stored === true };
  }

  /**
   * Enabled endpoints (other than `busy`) with something queued whose retry,
   * if any, is due, each with its next batch (its oldest `limit` events) read
   * in the same statement: one query a round, whatever the number of
   * endpoints, and none more to send. `queued` counts at most `limit` (a long
   * queue is not counted through); `oldest` is the batch's.
   */
  async due(now: Date, limit: number, busy: readonly string[]): Promise<DueEndpoint[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT e.*, b.queued, b.oldest, b.batch FROM webhook_endpoints e
        CROSS JOIN LATERAL (
          SELECT count(*) AS queued, min(q.created_at) AS oldest,
                 jsonb_agg(jsonb_build_array(q.seq, q.event_id, q.event, q.created_at) ORDER BY q.seq) AS batch
            FROM (SELECT seq, event_id, event, created_at FROM webhook_deliveries WHERE endpoint_id = e.endpoint_id ORDER BY seq LIMIT $2) q
        ) b
        WHERE e.enabled AND (e.next_attempt_at IS NULL OR e.next_attempt_at <= $1) AND b.queued > 0 AND e.endpoint_id <> ALL($3::uuid[])`,
      [now.toISOString(), limit, busy],
    );
    return rows.map((r) => {
      const batch = (typeof r.batch === 'string' ? JSON.parse(r.batch) : r.batch) as Array<[number | string, string, Record<string, unknown>, string]>;
      return {
        ...toEndpoint(r),
        queued: Number(r.queued),
        oldest: toDate(r.oldest)!,
        batch: batch.map(([seq, eventId, event, createdAt]) => ({ seq: Number(seq), eventId, event, createdAt: new Date(createdAt) })),
      };
    });
  }

  /** Queued events over every endpoint, and how many enabled endpoints are failing (metrics), in one statement. */
  async backlog(): Promise<{ queued: number; failing: number }> {
    const [row] = await this.db.query<{ queued: string | number; failing: string | number }>(
      'SELECT (SELECT count(*) FROM webhook_deliveries) AS queued, (SELECT count(*) FROM webhook_endpoints WHERE enabled AND failures > 0) AS failing',
    );
    return { queued: Number(row!.queued), failing: Number(row!.failing) };
  }

  async queued(endpointId: string, limit: number): Promise<QueuedDelivery[]> {
    const rows = await this.db.query<Record<string, unknown>>('SELECT seq, event_id, event, created_at FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY seq LIMIT $2', [endpointId, limit]);
    return rows.map((r) => ({ seq: Number(r.seq), eventId: String(r.event_id), event: (typeof r.event === 'string' ? JSON.parse(r.event) : r.event) as Record<string, unknown>, createdAt: toDate(r.created_at)! }));
  }

  async queuedCount(endpointId: string): Promise<number> {
    const [row] = await this.db.query<{ n: string | number }>('SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1', [endpointId]);
    return Number(row!.n);
  }

  /** Events older than `before` are given up; returns how many. */
  async expire(endpointId: string, before: Date): Promise<number> {
    return (await this.db.query('DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND created_at < $2 RETURNING 1', [endpointId, before.toISOString()])).length;
  }

  async streamPosition(): Promise<string | undefined> {
    const [row] = await this.db.query<{ last_id: string }>('SELECT last_id FROM webhook_stream_position WHERE id = 1');
    return row?.last_id;
  }

  /**
   * One attempt's outcome in one statement (atomic): delivered events leave
   * the queue, the endpoint's retry state moves, the attempt is logged and
   * the log keeps its last ATTEMPTS_KEPT (the new row is not visible to the
   * statement's own DELETE, hence one fewer of the old).
   */
  async recordAttempt(endpointId: string, tenantId: string, a: AttemptRow & { delivered: readonly number[]; failures: number; failingSince: Date | null }): Promise<void> {
    await this.db.query(
      `WITH del AS (DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND seq = ANY($2::bigint[])),
            upd AS (UPDATE webhook_endpoints SET failures = $3, failing_since = $4, next_attempt_at = $5 WHERE endpoint_id = $1),
            ins AS (INSERT INTO webhook_attempts (endpoint_id, tenant_id, attempted_at, events, first_event_id, status, error, latency_ms, next_attempt_at)
                    VALUES ($1, $6, $7, $8, $9, $10, $11, $12, $5))
       DELETE FROM webhook_attempts WHERE endpoint_id = $1 AND attempt_id <= (SELECT attempt_id FROM webhook_attempts WHERE endpoint_id = $1 ORDER BY attempt_id DESC OFFSET $13 LIMIT 1)`,
      [
        endpointId,
        a.delivered,
        a.failures,
        a.failingSince?.toISOString() ?? null,
        a.nextAttemptAt?.toISOString() ?? null,
        tenantId,
        a.attemptedAt.toISOString(),
        a.events,
        a.firstEventId,
        a.status,
        a.error,
        a.latencyMs,
        ATTEMPTS_KEPT - 1,
      ],
    );
  }

  async attempts(endpointId: string, limit: number): Promise<AttemptRow[]> {
    const rows = await this.db.query<Record<string, unknown>>('SELECT * FROM webhook_attempts WHERE endpoint_id = $1 ORDER BY attempt_id DESC LIMIT $2', [endpointId, limit]);
    return rows.map((r) => ({
      attemptedAt: toDate(r.attempted_at)!,
      events: Number(r.events),
      firstEventId: (r.first_event_id as string | null) ?? null,
      status: r.status === null ? null : Number(r.status),
      error: (r.error as string | null) ?? null,
      latencyMs: Number(r.latency_ms),
      nextAttemptAt: toDate(r.next_attempt_at),
    }));
  }

  /** Takes or renews the sender's lease on the database's clock; true while `holder` has it. */
  async lease(holder: string, ms: number): Promise<boolean> {
    const rows = await this.db.query(
      `INSERT INTO webhook_sender_lease (id, holder, until) VALUES (1, $1, now() + $2 * interval '1 millisecond')
       ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, until = excluded.until
        WHERE webhook_sender_lease.holder = excluded.holder OR webhook_sender_lease.until < now()
       RETURNING 1`,
      [holder, ms],
    );
    return rows.length > 0;
  }

  async release(holder: string): Promise<void> {
    await this.db.query('DELETE FROM webhook_sender_lease WHERE id = 1 AND holder = $1', [holder]);
  }
}

/** Locks the tenant row (serializing with every tenant mutation and its feed record); undefined when it does not exist or is deleted. */
async function lockTenant(tx: Queryable, tenantId: string): Promise<LockedTenant | undefined> {
  if (!isCanonicalUuid(tenantId)) return undefined;
  const [row] = await tx.query<LockedTenant>('SELECT version, webhooks_version FROM tenants WHERE tenant_id = $1 AND deleted_at IS NULL FOR UPDATE', [tenantId]);
  return row;
}

async function interestOf(q: Queryable, tenantId: string): Promise<string[]> {
  const rows = await q.query<{ events: unknown }>('SELECT events FROM webhook_endpoints WHERE tenant_id = $1 AND enabled', [tenantId]);
  return unionOf(rows.map((r) => (typeof r.events === 'string' ? JSON.parse(r.events) : r.events) as string[]));
}

/** The union of endpoints' event lists, in WEBHOOK_EVENT_TYPES order (one canonical form for comparing and for the feed). */
function unionOf(lists: readonly string[][]): string[] {
  const wanted = new Set(lists.flat());
  return WEBHOOK_EVENT_TYPES.filter((t) => wanted.has(t));
}


function toEndpoint(r: Record<string, unknown>): WebhookEndpointRow {
  return {
    endpointId: String(r.endpoint_id),
    tenantId: String(r.tenant_id),
    url: String(r.url),
    events: (typeof r.events === 'string' ? JSON.parse(r.events) : r.events) as string[],
    enabled: r.enabled === true,
    secret: String(r.secret),
    previousSecret: (r.previous_secret as string | null) ?? null,
    previousExpiresAt: toDate(r.previous_expires_at),
    createdAt: toDate(r.created_at)!,
    updatedAt: toDate(r.updated_at)!,
    failures: Number(r.failures),
    failingSince: toDate(r.failing_since),
    nextAttemptAt: toDate(r.next_attempt_at),
  };
}

function toDate(v: unknown): Date | null {
  if (v === null || v === undefined) return null;
  return v instanceof Date ? v : new Date(String(v));
}
