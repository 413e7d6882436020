import { randomUUID } from 'node:crypto';
import { signedHeaders, type Clock, type Logger } from '@service-relay/core';
import type { WebhookEventRecord } from '@service-relay/webhook-events';
import type { WebhookSettings } from '../config';
import type { TenantCrypto } from '../crypto/tenant-crypto';
import type { DueEndpoint, NewEvent, WebhookStore } from '../store/webhook-store';
import type { WebhookEventSource } from './webhook-source';

/** Events taken from the stream per read. */
const READ_BATCH = 500;
/** How often the sender looks for endpoints whose batch or retry is due, while events arrive or wait. */
const TICK_MS = 100;
/**
 * With nothing routed, no batch waiting and no retry of this sender's own
 * coming, the due query runs this often only: for what it cannot know of
 * (an endpoint switched on at another registry replica, retries scheduled by
 * the lease's previous holder).
 */
const IDLE_DUE_MS = 5000;
/**
 * After a read that did not fill a batch, the router waits before the next
 * (half of WEBHOOK_BATCH_WAIT_MS, at most this), so a steady trickle of
 * events is stored a few dozen at a time rather than one statement per
 * event. A batch waits WEBHOOK_BATCH_WAIT_MS from its oldest event anyway,
 * so gathering for half of it delays no request. Measured (bench
 * webhooks_fanout_ratio, embedded PGlite): one transaction per event cost the
 * registry 3-5 ms of CPU per event (30% of a core at 60 events/s); one
 * statement per read costs 5-7 ms whatever the read holds.
 */
const MAX_ROUTE_GATHER_MS = 500;
/** Endpoints with a request in flight at once, at most (each has at most one). */
const MAX_IN_FLIGHT = 64;
/** How much of an endpoint's answer is kept in its log. */
const ERROR_CHARS = 200;

export interface WebhookSenderMetrics {
  request(result: 'ok' | 'http_error' | 'timeout' | 'network', seconds: number): void;
  events(result: 'delivered' | 'expired' | 'unrouted', n: number): void;
  backlog(queued: number, failing: number): void;
}

export interface WebhookSenderDeps {
  store: WebhookStore;
  source: WebhookEventSource;
  crypto: TenantCrypto;
  settings: WebhookSettings;
  clock: Clock;
  logger: Logger;
  metrics: WebhookSenderMetrics;
}

/** The delay before retry number `failures` (1 = the first): exponential, capped, with jitter in [½, 1] of it. */
export function retryDelayMs(failures: number, settings: Pick<WebhookSettings, 'retryBaseMs' | 'retryMaxMs'>, random: () => number = Math.random): number {
  const ceiling = Math.min(settings.retryMaxMs, settings.retryBaseMs * 2 ** Math.min(failures - 1, 30));
  return Math.round(ceiling * (0.5 + random() * 0.5));
}

/** The public shape of an event (docs/PROTOCOL.md "Webhooks"). */
export function eventJson(id: string, r: WebhookEventRecord): Record<string, unknown> {
  let data: unknown;
  if (r.dataJson !== undefined) {
    try {
      data = JSON.parse(r.dataJson);
    } catch {
      data = undefined;
    }
  }
  return {
    id,
    type: r.type,
    tenant_id: r.tenantId,
    created_at: new Date(r.ms).toISOString(),
    ...(r.channel !== undefined && { channel: r.channel }),
    ...(r.userId !== undefined && { user_id: r.userId }),
    ...(data !== undefined && { data }),
  };
}

/**
 * The webhook sender (#32; docs/ARCHITECTURE.md "Webhooks"). One registry
 * replica at a time holds its lease (PostgreSQL, the database's clock) and
 * then runs two loops: routing takes realtime's events from the stream and
 * writes one delivery per interested endpoint with the stream position in
 * one transaction (durable from then on, stream trimmed after); delivery
 * sends each endpoint's queue in order, one request in flight per endpoint,
 * batches of up to WEBHOOK_BATCH_MAX or after WEBHOOK_BATCH_WAIT_MS, retried
 * with backoff and jitter until WEBHOOK_RETRY_FOR_S after the event. A slow
 * or failing endpoint holds only its own queue.
 */
export class WebhookSender {
  private readonly holder = randomUUID();
  private leased = false;
  private stopped = false;
  private readonly inFlight = new Map<string, Promise<void>>();
  private leaseTimer: NodeJS.Timeout | undefined;
  private tickTimer: NodeJS.Timeout | undefined;
  private routing: Promise<void> = Promise.resolve();
  private lastBacklogAt = 0;
  /**
   * When the due query next needs to run: when the earliest waiting batch
   * fills its WEBHOOK_BATCH_WAIT_MS, when stored events could first be due,
   * right after a request that succeeded (the rest of its queue), when a
   * failed one's retry is due, at once after the lease is taken or an
   * endpoint is switched on here, and otherwise every IDLE_DUE_MS.
   */
  private nextDueCheckAt = 0;

  /** Bumped whenever a read stored deliveries: an endpoint busy meanwhile may have some waiting. */
  private routedGeneration = 0;
  private readonly gatherMs: number;

  constructor(private readonly deps: WebhookSenderDeps) {
    this.gatherMs = Math.min(MAX_ROUTE_GATHER_MS, Math.max(10, Math.floor(deps.settings.batchWaitMs / 2)));
  }

  start(): void {
    const renew = async () => {
      try {
        const had = this.leased;
        this.leased = await this.deps.store.lease(this.holder, this.deps.settings.leaseMs);
        if (this.leased && !had) {
          this.deps.logger.info('webhook sender: lease taken, sending');
          // Retries the previous holder scheduled, and what it left queued.
          this.dueAt(0);
          this.routing = this.routing.then(() => this.routeLoop()).catch((err: unknown) => this.deps.logger.warn({ err: (err as Error).message }, 'webhook sender: routing stopped'));
        }
      } catch (err) {
        this.leased = false;
        this.deps.logger.warn({ err: (err as Error).message }, 'webhook sender: lease not renewed');
      }
      if (!this.stopped) this.leaseTimer = setTimeout(() => void renew(), Math.max(100, Math.floor(this.deps.settings.leaseMs / 3)));
    };
    void renew();
    const tick = async () => {
      if (this.leased) await this.deliverDue().catch((err: unknown) => this.deps.logger.warn({ err: (err as Error).message }, 'webhook sender: delivery round failed'));
      if (!this.stopped) this.tickTimer = setTimeout(() => void tick(), TICK_MS);
    };
    this.tickTimer = setTimeout(() => void tick(), TICK_MS);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.leaseTimer);
    clearTimeout(this.tickTimer);
    await Promise.allSettled([this.routing, ...this.inFlight.values()]);
    if (this.leased) await this.deps.store.release(this.holder).catch(() => {});
    this.leased = false;
    this.deps.source.close();
  }

  /** Stream -> database, in order, while this replica holds the lease. */
  private async routeLoop(): Promise<void> {
    let position = await this.deps.store.streamPosition();
    while (this.leased && !this.stopped) {
      let read;
      try {
        read = await this.deps.source.read(position, READ_BATCH, 500);
      } catch (err) {
        this.deps.logger.warn({ err: (err as Error).message }, 'webhook sender: event stream not readable');
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (read.length === 0) continue;
      const last = read[read.length - 1]!.id;
      try {
        if (!(await this.route(read.flatMap((e) => (e.record ? [e.record] : [])), position, last))) {
          // The position had moved: an earlier try of this read was stored after all (its answer
          // came too late). Go on from where the database is, storing nothing twice.
          position = await this.deps.store.streamPosition();
          this.deps.logger.info({ position }, 'webhook sender: this read was stored already; going on from the stored position');
          continue;
        }
      } catch (err) {
        this.deps.source.unread(read);
        this.deps.logger.warn({ err: (err as Error).message }, 'webhook sender: events not stored; read again');
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      position = last;
      await this.deps.source.trim(last).catch(() => {});
      if (read.length < READ_BATCH && !this.stopped) await new Promise((r) => setTimeout(r, this.gatherMs));
    }
  }

  /** False when the stream position was no longer `from` (nothing stored). */
  private async route(records: readonly WebhookEventRecord[], from: string | undefined, to: string): Promise<boolean> {
    const events: NewEvent[] = records.map((r) => {
      const id = randomUUID();
      return { tenantId: r.tenantId, type: r.type, eventId: id, event: eventJson(id, r), createdAt: new Date(r.ms) };
    });
    const { routed, stored } = await this.deps.store.route(events, from, to);
    if (!stored) return false;
    if (routed > 0) {
      this.routedGeneration += 1;
      // A batch that may already be full goes at the next tick; otherwise not before its wait is over.
      const soonest = this.deps.clock.now() + (routed >= this.deps.settings.batchMax ? 0 : this.deps.settings.batchWaitMs);
      this.dueAt(soonest);
    }
    if (routed < events.length) this.deps.metrics.events('unrouted', events.length - routed);
    return true;
  }

  /** An endpoint switched on in this process: its queue is looked at now, not at the next idle round. */
  poke(): void {
    this.dueAt(0);
  }

  private dueAt(ms: number): void {
    this.nextDueCheckAt = Math.min(this.nextDueCheckAt, ms);
  }

  private async deliverDue(): Promise<void> {
    const now = this.deps.clock.now();
    if (now - this.lastBacklogAt > 5000) {
      this.lastBacklogAt = now;
      const b = await this.deps.store.backlog();
      this.deps.metrics.backlog(b.queued, b.failing);
    }
    if (now < this.nextDueCheckAt || this.inFlight.size >= MAX_IN_FLIGHT) return;
    // Routing and finished requests meanwhile lower it again; if the query fails, the next tick tries again.
    this.nextDueCheckAt = Number.POSITIVE_INFINITY;
    // Taken before the query reads the queues: anything stored after it counts as "stored meanwhile".
    const generation = this.routedGeneration;
    let due: DueEndpoint[];
    try {
      due = await this.deps.store.due(new Date(now), this.deps.settings.batchMax, [...this.inFlight.keys()]);
    } catch (err) {
      this.dueAt(now);
      throw err;
    }
    let next = now + IDLE_DUE_MS;
    for (const e of due) {
      if (this.inFlight.has(e.endpointId) || !this.leased || this.stopped) continue;
      if (this.inFlight.size >= MAX_IN_FLIGHT) {
        next = now;
        continue;
      }
      // A batch waits for more events, at most WEBHOOK_BATCH_WAIT_MS; a retry goes when it is due.
      if (e.failures === 0 && e.queued < this.deps.settings.batchMax && now - e.oldest.getTime() < this.deps.settings.batchWaitMs) {
        next = Math.min(next, e.oldest.getTime() + this.deps.settings.batchWaitMs);
        continue;
      }
      const p = this.deliver(e)
        .then(
          // After a failure the query runs again when the retry is due. After a success, only if more may be
          // waiting: a full batch (the queue may go on), or events stored while the endpoint was busy (the rounds
          // meanwhile left it out); otherwise what routing stores next schedules its own round.
          (retryAt) => this.dueAt(retryAt ?? (e.batch.length >= this.deps.settings.batchMax || this.routedGeneration !== generation ? 0 : Number.POSITIVE_INFINITY)),
          (err: unknown) => {
            this.dueAt(0);
            this.deps.logger.warn({ err: (err as Error).message, endpoint_id: e.endpointId }, 'webhook sender: attempt not recorded; sent again');
          },
        )
        .finally(() => this.inFlight.delete(e.endpointId));
      this.inFlight.set(e.endpointId, p);
    }
    this.dueAt(next);
  }

  /**
   * One request to one endpoint with the batch the due query read; the
   * outcome is recorded with the queue in one statement. Returns when a
   * failed attempt is retried (undefined after a success).
   */
  private async deliver(e: DueEndpoint): Promise<number | undefined> {
    const { store, settings, clock, crypto, metrics } = this.deps;
    let batch = e.batch;
    // Only a batch that holds an event past the retry window costs a statement more.
    const cutoff = clock.now() - settings.retryForMs;
    if (e.oldest.getTime() < cutoff) {
      const expired = await store.expire(e.endpointId, new Date(cutoff));
      if (expired > 0) {
        metrics.events('expired', expired);
        this.deps.logger.warn({ tenant_id: e.tenantId, endpoint_id: e.endpointId, events: expired }, 'webhook events given up after WEBHOOK_RETRY_FOR_S');
      }
      batch = await store.queued(e.endpointId, settings.batchMax);
    }
    if (batch.length === 0) return undefined;
    const body = JSON.stringify({ events: batch.map((d) => d.event) });
    const startedAt = clock.now();
    const timestampS = Math.floor(startedAt / 1000);
    const secrets = [crypto.openWebhookSecret(e.endpointId, e.secret)];
    if (e.previousSecret && e.previousExpiresAt && e.previousExpiresAt.getTime() > startedAt) secrets.push(crypto.openWebhookSecret(e.endpointId, e.previousSecret));
    const messageId = batch[0]!.eventId;
    let status: number | null = null;
    let error: string | null = null;
    let result: 'ok' | 'http_error' | 'timeout' | 'network' = 'network';
    const t0 = performance.now();
    try {
      const res = await fetch(e.url, {
        method: 'POST',
        redirect: 'manual',
        signal: AbortSignal.timeout(settings.timeoutMs),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'service-relay-webhooks/1',
          ...signedHeaders(secrets, messageId, timestampS, body),
        },
        body,
      });
      status = res.status;
      const text = await res.text().catch(() => '');
      result = status >= 200 && status < 300 ? 'ok' : 'http_error';
      if (result !== 'ok') error = text.slice(0, ERROR_CHARS) || `HTTP ${status}`;
    } catch (err) {
      const name = (err as Error).name;
      result = name === 'TimeoutError' || name === 'AbortError' ? 'timeout' : 'network';
      error = result === 'timeout' ? `no answer within ${settings.timeoutMs} ms` : ((err as Error & { cause?: Error }).cause?.message ?? (err as Error).message).slice(0, ERROR_CHARS);
    }
    const latencyMs = Math.round(performance.now() - t0);
    metrics.request(result, latencyMs / 1000);
    const ok = result === 'ok';
    const failures = ok ? 0 : e.failures + 1;
    const nextAttemptAt = ok ? null : new Date(clock.now() + retryDelayMs(failures, settings));
    await store.recordAttempt(e.endpointId, e.tenantId, {
      attemptedAt: new Date(startedAt),
      events: batch.length,
      firstEventId: messageId,
      status,
      error,
      latencyMs,
      nextAttemptAt,
      delivered: ok ? batch.map((d) => d.seq) : [],
      failures,
      failingSince: ok ? null : (e.failingSince ?? new Date(startedAt)),
    });
    if (ok) metrics.events('delivered', batch.length);
    return nextAttemptAt?.getTime();
  }
}
