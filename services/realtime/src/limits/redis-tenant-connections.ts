import { randomUUID } from 'node:crypto';
import { withTimeout, type Logger, type Redis } from '@service-relay/core';
import type { Scheduler } from '../timers/scheduler';
import { defineTenantConnectionCommands, type TenantConnectionCommands } from './redis-tenant-connections-scripts';
import { MemoryTenantConnections } from './memory-tenant-connections';
import type { Admission, TenantConnections, TenantSlot } from './tenant-connections';

/**
 * Spare slots an instance takes ahead per tenant, at most: its next
 * connections of that tenant are admitted without a Redis round trip. A
 * connect's round trip to Redis was ~16% of the connect rate (bench
 * connect-rate, the count kept in memory instead: 2,954–3,035 → 3,450–3,610
 * conn/s); 16 ahead makes it one trip per 17 connects in a burst.
 */
export const MAX_SPARE_SLOTS = 16;
/** Deleted tenants remembered per instance (a deletion is rare; past this the oldest is forgotten). */
const MAX_FORGOTTEN = 10_000;

interface Waiter {
  slot: TenantSlot;
  resolve(admission: Admission): void;
}

/** What Redis records for this instance and one tenant, as far as this instance knows. */
interface Reservation {
  /** Slots recorded (never more than Redis holds: lowered before a write that may lower it). */
  slots: number;
  /** The last write sent for this tenant that may lower the record; an answer to a write sent before it is stale. */
  lowering: number;
}

export interface RedisTenantConnectionsOptions {
  redis: Redis;
  /** REDIS_PREFIX. */
  prefix: string;
  limit: number;
  /** Deadlines and heartbeats run on this clock. */
  scheduler: Scheduler;
  logger: Logger;
  /** How often this instance re-writes its counts (default 10 s). */
  heartbeatMs?: number;
  /** How long a count stands without a heartbeat (default 30 s: three missed beats). */
  ttlMs?: number;
  /** A Redis call slower than this is treated as Redis being down (default 1 s). */
  deadlineMs?: number;
  /** Tests tell instances apart; a fresh random id otherwise. */
  instanceId?: string;
}

/**
 * The per-tenant count across every realtime instance on one Redis (the
 * hash and its scripts: redis-tenant-connections-scripts.ts). Each
 * instance writes only its own field, always an absolute number of slots
 * (never an increment), so a lost write is repaired by the next one and the
 * heartbeat re-asserts the truth.
 *
 * Far below the limit an instance holds a few spare slots ahead (recorded in
 * Redis like admitted ones, so the limit is never passed) and admits from
 * them without asking Redis. Near the limit there are none: the room they may
 * take is an eighth of what is left. A spare slot another instance holds can
 * refuse a connection before the limit is reached, until that instance's
 * next write gives it back (a release, or the heartbeat within 10 s: each
 * keeps spare slots only while the room allows).
 *
 * While Redis cannot answer, admission falls back to this instance's own
 * count against the same limit (fail open to a per-instance limit, like the
 * gateway's rate limits): a counter outage must not refuse every new
 * connection of every tenant. Once Redis answers again the next heartbeat
 * restores the shared count; connections admitted meanwhile stay.
 */
export class RedisTenantConnections implements TenantConnections {
  readonly limit: number;
  private readonly redis: TenantConnectionCommands;
  private readonly local: MemoryTenantConnections;
  private readonly reservations = new Map<string, Reservation>();
  /** Deleted tenants (forget): nothing is written for them but the removal of this instance's field (bounded, oldest out). */
  private readonly forgotten = new Set<string>();
  private seq = 0;
  private readonly instanceId: string;
  private readonly heartbeatMs: number;
  private readonly ttlMs: number;
  private readonly deadlineMs: number;
  private cancelBeat: () => void = () => {};
  private degraded = false;
  private closed = false;

  constructor(private readonly opts: RedisTenantConnectionsOptions) {
    this.limit = opts.limit;
    this.local = new MemoryTenantConnections(opts.limit);
    this.instanceId = opts.instanceId ?? randomUUID();
    this.heartbeatMs = opts.heartbeatMs ?? 10_000;
    this.ttlMs = opts.ttlMs ?? 30_000;
    this.deadlineMs = opts.deadlineMs ?? 1000;
    if (this.ttlMs <= this.heartbeatMs) throw new Error('the count TTL must be longer than the heartbeat');
    this.redis = defineTenantConnectionCommands(opts.redis);
    this.armHeartbeat();
  }

  /** One function for every slot (a closure per connection would be kept as long as it). */
  private readonly onRelease = (tenantId: string): void => this.writeSoon(tenantId);
  /** Tenants whose count changed by releases in this tick: written once each, at its end. */
  private readonly dirty = new Set<string>();

  /**
   * A disable closes thousands of a tenant's connections in one go: their
   * releases cost one write per tenant instead of one `EVAL` each.
   */
  private writeSoon(tenantId: string): void {
    if (this.dirty.size === 0) setImmediate(this.flush);
    this.dirty.add(tenantId);
  }

  private readonly flush = (): void => {
    const tenants = [...this.dirty];
    this.dirty.clear();
    // Logged by write(); the heartbeat writes it again. Released slots stay as spare ones if the room allows.
    for (const t of tenants) this.write(t).catch(() => {});
  };

  /** Per-tenant limits (#30) as last asked with: heartbeats and releases write with them. */
  private readonly tenantLimits = new Map<string, number>();

  private limitOf(tenantId: string): number {
    return this.tenantLimits.get(tenantId) ?? this.limit;
  }

  acquire(tenantId: string, limit: number = this.limit): Promise<Admission> {
    this.forgotten.delete(tenantId);
    const before = this.limitOf(tenantId);
    if (limit !== before) {
      if (limit === this.limit) this.tenantLimits.delete(tenantId);
      else this.tenantLimits.set(tenantId, limit);
      // Spare slots were taken under the old limit: the next admission asks Redis, which recomputes them.
      if (limit < before) this.reservations.delete(tenantId);
    }
    // Taken before Redis answers, so concurrent acquires of one tenant propose distinct counts.
    const slot = this.local.take(tenantId, this.onRelease);
    // A spare slot: Redis counts it already.
    if (this.covered(tenantId)) return Promise.resolve({ ok: true, slot });
    return new Promise((resolve) => {
      const waiting = this.asking.get(tenantId);
      if (waiting) waiting.push({ slot, resolve });
      else this.asking.set(tenantId, [{ slot, resolve }]);
      if (!this.askScheduled && !this.inFlight.has(tenantId)) {
        this.askScheduled = true;
        process.nextTick(this.ask);
      }
    });
  }

  /**
   * Connections waiting for Redis, by tenant. One call per tenant is out at a
   * time: the connections a tick brings (a batch of token checks answered
   * together) ask together, and those that come while a call is out wait for
   * its answer, whose spare slots usually admit them without another call.
   */
  private readonly asking = new Map<string, Waiter[]>();
  private readonly inFlight = new Set<string>();
  private askScheduled = false;

  private readonly ask = (): void => {
    this.askScheduled = false;
    for (const [tenantId, waiters] of [...this.asking]) {
      if (this.inFlight.has(tenantId)) continue;
      this.asking.delete(tenantId);
      void this.askRedis(tenantId, waiters);
    }
  };

  /** Every slot this instance holds of the tenant, the ones just taken included, is recorded in Redis. */
  private covered(tenantId: string): boolean {
    const r = this.reservations.get(tenantId);
    return r !== undefined && this.local.held(tenantId) <= r.slots;
  }

  private async askRedis(tenantId: string, first: Waiter[]): Promise<void> {
    this.inFlight.add(tenantId);
    try {
      let waiters: Waiter[] | undefined = first;
      let answered = true;
      while (waiters) {
        if (!answered) {
          // Redis just failed this tenant's call: the next ones are decided here, not after another deadline.
          this.admitLocally(tenantId, waiters, this.local.held(tenantId));
        } else if (this.covered(tenantId)) {
          this.admit(tenantId, waiters, waiters.length);
        } else {
          answered = await this.askOnce(tenantId, waiters);
        }
        waiters = this.asking.get(tenantId);
        this.asking.delete(tenantId);
      }
    } finally {
      this.inFlight.delete(tenantId);
    }
  }

  /** One acquire call for the waiters (in order); false when Redis did not answer and the instance's own count decided. */
  private async askOnce(tenantId: string, waiters: Waiter[]): Promise<boolean> {
    const need = this.local.held(tenantId);
    if (this.redis.status === 'ready') {
      try {
        const now = this.opts.scheduler.now();
        const seq = this.sent(tenantId, false);
        const [admitted, , recorded] = await withTimeout(
          this.redis.relayTenantAcquire(this.key(tenantId), this.instanceId, need, now, now + this.ttlMs, this.limitOf(tenantId), this.keyTtlMs(), MAX_SPARE_SLOTS, waiters.length),
          this.deadlineMs,
        );
        this.answered(tenantId, seq, recorded, false);
        if (this.degraded) {
          this.recovered();
          // Writes skipped during the outage: the shared count is stale until re-asserted.
          void this.heartbeat();
        }
        this.admit(tenantId, waiters, admitted);
        return true;
      } catch (err) {
        this.opts.logger.debug({ err: (err as Error).message }, 'tenant connection count: redis call failed');
      }
    }
    this.degrade();
    this.admitLocally(tenantId, waiters, need);
    return false;
  }

  /** Redis cannot answer: the waiters (the last of the `held` slots taken here) are admitted while this instance's own count fits the limit. */
  private admitLocally(tenantId: string, waiters: Waiter[], held: number): void {
    this.admit(tenantId, waiters, Math.max(0, this.limitOf(tenantId) - (held - waiters.length)));
  }

  /** The first `admitted` waiters get their slots; the others are refused and their slots given back. */
  private admit(tenantId: string, waiters: Waiter[], admitted: number): void {
    waiters.forEach((w, i) => {
      if (i < admitted) return w.resolve({ ok: true, slot: w.slot });
      this.local.untake(tenantId);
      w.resolve({ ok: false, limit: this.limitOf(tenantId) });
    });
  }

  /** Re-writes every tenant this instance holds slots of, with a fresh deadline (spare slots trimmed to the room left). */
  async heartbeat(): Promise<void> {
    if (this.redis.status !== 'ready') return this.degrade();
    // One command per tenant, sent back to back, not a pipeline: on a Redis
    // Cluster each tenant's key has its own slot, and a pipeline must stay on one node.
    const writes = [...this.tenantsHere()].map((t) => this.write(t));
    if (writes.length === 0) return this.recovered();
    try {
      await withTimeout(Promise.all(writes), this.deadlineMs);
      this.recovered();
    } catch (err) {
      this.opts.logger.debug({ err: (err as Error).message }, 'tenant connection heartbeat failed');
      this.degrade();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.cancelBeat();
    // Tenants whose last slots went in this tick have a write pending, and spare slots are held without connections: they go too.
    const held = [...new Set([...this.tenantsHere(), ...this.dirty])];
    this.dirty.clear();
    this.reservations.clear();
    await this.local.close();
    // Anything still held goes now, not one TTL later.
    if (held.length > 0 && this.redis.status === 'ready') {
      await withTimeout(Promise.all(held.map((t) => this.redis.hdel(this.key(t), this.instanceId))), this.deadlineMs).catch(() => {});
    }
  }

  /** The tenant was deleted: no spare slots or heartbeat for it, and its whole record goes. */
  async forget(tenantId: string): Promise<void> {
    this.forgotten.add(tenantId);
    if (this.forgotten.size > MAX_FORGOTTEN) this.forgotten.delete(this.forgotten.values().next().value!);
    this.reservations.delete(tenantId);
    this.dirty.delete(tenantId);
    if (this.closed) return;
    await withTimeout(this.redis.del(this.key(tenantId)), this.deadlineMs);
  }

  /**
   * Writes this instance's slots of a tenant: the connections it holds, and
   * the spare slots it has if the room allows. Until the answer only the held
   * ones are taken as recorded, since the write may lower the record.
   */
  private write(tenantId: string): Promise<unknown> {
    if (this.closed || this.redis.status !== 'ready') return Promise.resolve();
    const held = this.local.held(tenantId);
    const r = this.reservations.get(tenantId);
    // A deleted tenant's connections still closing are not recorded again (a heartbeat would bring its key back); the last one removes the field.
    if (this.forgotten.has(tenantId)) return held === 0 ? this.redis.hdel(this.key(tenantId), this.instanceId) : Promise.resolve();
    const spare = r ? Math.max(0, Math.min(MAX_SPARE_SLOTS, r.slots - held)) : 0;
    const seq = this.sent(tenantId, true);
    const entry = this.reservations.get(tenantId)!;
    entry.slots = Math.min(entry.slots, held);
    const now = this.opts.scheduler.now();
    return this.redis.relayTenantSet(this.key(tenantId), this.instanceId, held, now + this.ttlMs, this.keyTtlMs(), this.limitOf(tenantId), now, spare).then(
      (recorded) => this.answered(tenantId, seq, recorded, true),
      (err: unknown) => {
        this.opts.logger.debug({ err: (err as Error).message }, 'tenant connection count not written');
        throw err;
      },
    );
  }

  /** Tenants this instance holds connections or spare slots of. */
  private tenantsHere(): Set<string> {
    return new Set([...[...this.local.entries()].map(([t]) => t), ...this.reservations.keys()]);
  }

  /** A write for this tenant is going out; `lowering`: it may lower the record (answers to writes sent before it no longer tell what Redis holds). */
  private sent(tenantId: string, lowering: boolean): number {
    this.seq += 1;
    const r = this.reservations.get(tenantId);
    if (!r) this.reservations.set(tenantId, { slots: 0, lowering: lowering ? this.seq : 0 });
    else if (lowering) r.lowering = this.seq;
    return this.seq;
  }

  /**
   * Redis answered write `seq` with what it now records for this instance.
   * One Redis connection answers in order, and an acquire never lowers the
   * record, so an acquire's answer is a floor unless a lowering write was
   * sent after it; the last lowering write's answer is the record itself
   * (the acquires sent after it are answered after it). A script retried as
   * EVAL after NOSCRIPT (a restarted or promoted Redis) can run out of that
   * order; the heartbeat re-asserts the record within 10 s.
   */
  private answered(tenantId: string, seq: number, recorded: number, lowering: boolean): void {
    const r = this.reservations.get(tenantId);
    if (!r || seq < r.lowering) return;
    if (lowering) {
      if (recorded <= 0 && this.local.held(tenantId) === 0) {
        this.reservations.delete(tenantId);
        this.tenantLimits.delete(tenantId);
        return;
      }
      r.slots = recorded;
    } else {
      r.slots = Math.max(r.slots, recorded);
    }
  }

  private armHeartbeat(): void {
    if (this.closed) return;
    this.cancelBeat = this.opts.scheduler.at(this.opts.scheduler.now() + this.heartbeatMs, () => {
      void this.heartbeat().finally(() => this.armHeartbeat());
    });
  }

  private key(tenantId: string): string {
    // The hash tag keeps a tenant's key on one slot should Redis be a cluster.
    return `${this.opts.prefix}tenant-conns:{${tenantId}}`;
  }

  /** The whole hash goes once no instance has written for two TTLs (real time, Redis's clock). */
  private keyTtlMs(): number {
    return 2 * this.ttlMs;
  }

  private degrade(): void {
    if (this.degraded) return;
    this.degraded = true;
    this.opts.logger.warn({ limit: this.limit }, 'tenant connection count: redis unavailable; MAX_CONNECTIONS_PER_TENANT holds per instance until it is back');
  }

  private recovered(): void {
    if (!this.degraded) return;
    this.degraded = false;
    this.opts.logger.info('tenant connection count back on redis');
  }
}
