import { randomUUID } from 'node:crypto';
import { withTimeout, type Logger, type Redis } from '@service-relay/core';
import type { Scheduler } from '../realtime/scheduler';
import { MemoryTenantConnections } from './memory-tenant-connections';
import type { Admission, TenantConnections } from './tenant-connections';

/**
 * One hash per tenant; a field per instance holding `<count>:<deadline ms>`.
 * Only fields whose deadline is still ahead count, so a SIGKILLed instance's
 * connections stop counting one TTL after its last heartbeat; a dead field is
 * deleted by the next acquire that sees it.
 *
 * KEYS: the tenant's hash. ARGV: instance id, proposed own count, now ms,
 * own deadline ms, limit, key ttl ms. Returns {admitted 0|1, others' count}.
 */
const ACQUIRE_SCRIPT = `
local now = tonumber(ARGV[3])
local others = 0
local own = tonumber(ARGV[2])
local entries = redis.call('HGETALL', KEYS[1])
for i = 1, #entries, 2 do
  if entries[i] == ARGV[1] then
    -- A proposal below what this instance already recorded was overtaken by a
    -- later acquire (a script retried as EVAL after NOSCRIPT on a fresh node or
    -- a promoted replica runs late): it must not lower the count.
    local v = entries[i + 1]
    local sep = string.find(v, ':', 1, true)
    local mine = sep and tonumber(string.sub(v, 1, sep - 1)) or 0
    if mine > own then own = mine end
  else
    local v = entries[i + 1]
    local sep = string.find(v, ':', 1, true)
    local deadline = sep and tonumber(string.sub(v, sep + 1)) or 0
    if deadline <= now then
      redis.call('HDEL', KEYS[1], entries[i])
    else
      others = others + (tonumber(string.sub(v, 1, sep - 1)) or 0)
    end
  end
end
if others + tonumber(ARGV[2]) > tonumber(ARGV[5]) then return {0, others} end
redis.call('HSET', KEYS[1], ARGV[1], own .. ':' .. ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {1, others}
`;

/** KEYS: the tenant's hash. ARGV: instance id, own count, own deadline ms, key ttl ms. A count of 0 removes the field. */
const SET_SCRIPT = `
if tonumber(ARGV[2]) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`;

type Commands = Redis & {
  relayTenantAcquire(key: string, instance: string, own: number, now: number, deadline: number, limit: number, keyTtlMs: number): Promise<[number, number]>;
  relayTenantSet(key: string, instance: string, own: number, deadline: number, keyTtlMs: number): Promise<number>;
};

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
 * The per-tenant count across every realtime instance on one Redis. Each
 * instance writes only its own field, always the absolute count it holds
 * (never an increment), so a lost write is repaired by the next one and the
 * heartbeat re-asserts the truth.
 *
 * While Redis cannot answer, admission falls back to this instance's own
 * count against the same limit (fail open to a per-instance limit, like the
 * gateway's rate limits): a counter outage must not refuse every new
 * connection of every tenant. Once Redis answers again the next heartbeat
 * restores the shared count; connections admitted meanwhile stay.
 */
export class RedisTenantConnections implements TenantConnections {
  readonly limit: number;
  private readonly redis: Commands;
  private readonly local: MemoryTenantConnections;
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
    opts.redis.defineCommand('relayTenantAcquire', { numberOfKeys: 1, lua: ACQUIRE_SCRIPT });
    opts.redis.defineCommand('relayTenantSet', { numberOfKeys: 1, lua: SET_SCRIPT });
    this.redis = opts.redis as Commands;
    this.armHeartbeat();
  }

  /** One function for every slot (a closure per connection would be kept as long as it). */
  private readonly onRelease = (tenantId: string): void => this.writeSoon(tenantId);
  /** Tenants whose count changed by releases in this tick: written once each, at its end. */
  private readonly dirty = new Set<string>();

  /**
   * A disable closes thousands of a tenant's connections in one go: their
   * releases cost one count write per tenant instead of one `EVAL` each (the
   * written value is the local count at the end of the tick, which is what
   * the last of those writes would have carried).
   */
  private writeSoon(tenantId: string): void {
    if (this.dirty.size === 0) setImmediate(this.flush);
    this.dirty.add(tenantId);
  }

  private readonly flush = (): void => {
    const tenants = [...this.dirty];
    this.dirty.clear();
    for (const t of tenants) this.write(t);
  };

  async acquire(tenantId: string): Promise<Admission> {
    const heldBefore = this.local.held(tenantId);
    // Reserved before the call, so concurrent acquires of one tenant propose distinct counts.
    const slot = this.local.take(tenantId, this.onRelease);
    const own = heldBefore + 1;
    if (this.redis.status === 'ready') {
      try {
        const now = this.opts.scheduler.now();
        const [admitted] = await withTimeout(
          this.redis.relayTenantAcquire(this.key(tenantId), this.instanceId, own, now, now + this.ttlMs, this.limit, this.keyTtlMs()),
          this.deadlineMs,
        );
        if (this.degraded) {
          this.recovered();
          // Writes skipped during the outage: the shared count is stale until re-asserted.
          void this.heartbeat();
        }
        if (admitted === 1) return { ok: true, slot };
        this.local.untake(tenantId);
        return { ok: false, limit: this.limit };
      } catch (err) {
        this.opts.logger.debug({ err: (err as Error).message }, 'tenant connection count: redis call failed');
      }
    }
    this.degrade();
    if (own <= this.limit) return { ok: true, slot };
    this.local.untake(tenantId);
    return { ok: false, limit: this.limit };
  }

  /** Re-writes every count this instance holds, with a fresh deadline. */
  async heartbeat(): Promise<void> {
    if (this.redis.status !== 'ready') return this.degrade();
    const now = this.opts.scheduler.now();
    // One command per tenant, sent back to back, not a pipeline: on a Redis
    // Cluster each tenant's key has its own slot, and a pipeline must stay on one node.
    const writes: Promise<unknown>[] = [];
    for (const [tenantId, count] of this.local.entries()) {
      writes.push(this.redis.relayTenantSet(this.key(tenantId), this.instanceId, count, now + this.ttlMs, this.keyTtlMs()));
    }
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
    // Tenants whose last slots went in this tick have a count write pending: they go too.
    const held = [...new Set([...[...this.local.entries()].map(([t]) => t), ...this.dirty])];
    this.dirty.clear();
    await this.local.close();
    // Anything still held goes now, not one TTL later.
    if (held.length > 0 && this.redis.status === 'ready') {
      await withTimeout(Promise.all(held.map((t) => this.redis.hdel(this.key(t), this.instanceId))), this.deadlineMs).catch(() => {});
    }
  }

  private write(tenantId: string): void {
    if (this.closed || this.redis.status !== 'ready') return;
    const count = this.local.held(tenantId);
    const deadline = this.opts.scheduler.now() + this.ttlMs;
    this.redis.relayTenantSet(this.key(tenantId), this.instanceId, count, deadline, this.keyTtlMs()).catch((err: unknown) => {
      // The heartbeat writes it again.
      this.opts.logger.debug({ err: (err as Error).message }, 'tenant connection release not written');
    });
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
