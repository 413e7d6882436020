import { withTimeout, type Clock, type Logger, type Redis } from '@service-relay/core';

/** How long a tenant's first publish on an instance waits for Redis before this instance's own view decides. */
const FIRST_SYNC_DEADLINE_MS = 500;
import { TokenBucket, type TakeResult } from './token-bucket';

/** A tenant's publish limit: `ratePerS` refill, `burst` at most at once. */
export interface PublishLimit {
  ratePerS: number;
  burst: number;
}

/**
 * Publishes per second per tenant, REST + WebSocket + host API together
 * (#30). `take` does not wait on Redis but for a tenant's first publish on
 * an instance: drivers are the memory one (one process: exact) and the Redis
 * one (cluster-wide, approximate).
 */
export interface TenantPublishRate {
  /** A promise only for a tenant's first publish on this instance (or after it went idle): one Redis call, then decided. */
  take(tenantId: string, limit: PublishLimit, n?: number): TakeResult | Promise<TakeResult>;
  /** The tenant was deleted (#30): its bucket goes, here and in Redis. */
  forget(tenantId: string): Promise<void>;
  close(): Promise<void>;
}

/** One process: a token bucket per tenant, exact. Tenants idle long enough to have refilled are dropped. */
export class MemoryTenantPublishRate implements TenantPublishRate {
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly sweep: NodeJS.Timeout;

  constructor(private readonly clock: Clock) {
    this.sweep = setInterval(() => this.buckets.clear(), 60_000);
    this.sweep.unref();
  }

  take(tenantId: string, limit: PublishLimit, n = 1): TakeResult {
    let bucket = this.buckets.get(tenantId);
    if (!bucket || bucket.ratePerS !== limit.ratePerS || bucket.burst !== limit.burst) {
      bucket = bucket ? bucket.resized(limit.ratePerS, limit.burst) : new TokenBucket(limit.ratePerS, limit.burst, this.clock);
      this.buckets.set(tenantId, bucket);
    }
    return bucket.take(n);
  }

  forget(tenantId: string): Promise<void> {
    this.buckets.delete(tenantId);
    return Promise.resolve();
  }

  close(): Promise<void> {
    clearInterval(this.sweep);
    this.buckets.clear();
    return Promise.resolve();
  }
}

/**
 * KEYS: the tenant's key. ARGV: admitted since the last sync, ms per token,
 * burst. A GCRA over the whole cluster: the key holds the theoretical
 * arrival time (TAT, Redis clock, ms); each sync advances it by what the
 * instance admitted and answers the bucket's level now (tokens, may be
 * negative: a debt others ran up).
 */
export const PUBLISH_SYNC_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
tat = tat + tonumber(ARGV[1]) * interval
redis.call('SET', KEYS[1], tostring(tat), 'PX', math.ceil(tat - now + burst * interval) + 1000)
local level = (now + burst * interval - tat) / interval
return tostring(level)
`;

type SyncCommands = Redis & { relayTenantPublishSync(key: string, admitted: number, intervalMs: number, burst: number): Promise<string> };

interface Tenant {
  limit: PublishLimit;
  /** The cluster bucket's level at the last sync, and when (this clock). */
  level: number;
  syncedAt: number;
  /** Admitted here since the last sync was sent. */
  pending: number;
  /** Sent with the sync in flight (not yet in `level`). */
  sending: number;
  lastUsed: number;
  inFlight: boolean;
  /** The first sync, while it is out: publishes meanwhile wait for it. */
  first: Promise<void> | undefined;
}

export interface RedisTenantPublishRateOptions {
  redis: Redis;
  prefix: string;
  clock: Clock;
  logger: Logger;
  /** How often an active tenant's count is reconciled (TENANT_RATE_SYNC_MS, default 100). */
  syncMs?: number;
  /** A tenant not published for this long is forgotten (its next publish starts from a fresh sync). Default 10 s. */
  idleMs?: number;
  /** Counted per sync call (for the metric). */
  onSync?: (ok: boolean) => void;
}

/**
 * The cluster-wide tenant publish rate (docs/OPERATIONS.md "Plans and
 * per-tenant limits"). Each instance decides from its own view of one shared
 * GCRA bucket per tenant: the level Redis answered at its last sync, plus the
 * refill since, minus what it admitted since. Every `syncMs` each tenant
 * active here sends what it admitted and gets the new level back: one
 * EVALSHA per active tenant per instance per interval, none per publish.
 * A tenant's first publish on an instance (or after `idleMs` idle) waits
 * for one sync (a promise), then is decided like the others. Redis failing: this
 * instance's own bucket decides (fail open to per instance).
 */
export class RedisTenantPublishRate implements TenantPublishRate {
  private readonly redis: SyncCommands;
  private readonly tenants = new Map<string, Tenant>();
  private readonly timer: NodeJS.Timeout;
  private readonly syncMs: number;
  private readonly idleMs: number;

  constructor(private readonly opts: RedisTenantPublishRateOptions) {
    opts.redis.defineCommand('relayTenantPublishSync', { numberOfKeys: 1, lua: PUBLISH_SYNC_SCRIPT });
    this.redis = opts.redis as SyncCommands;
    this.syncMs = opts.syncMs ?? 100;
    this.idleMs = opts.idleMs ?? 10_000;
    this.timer = setInterval(() => this.syncAll(), this.syncMs);
    this.timer.unref();
  }

  take(tenantId: string, limit: PublishLimit, n = 1): TakeResult | Promise<TakeResult> {
    const now = this.opts.clock.now();
    let t = this.tenants.get(tenantId);
    if (!t) {
      const fresh: Tenant = { limit, level: limit.burst, syncedAt: now, pending: 0, sending: 0, lastUsed: now, inFlight: false, first: undefined };
      t = fresh;
      this.tenants.set(tenantId, fresh);
      // The first publish here: the cluster's level first (one call), so a fresh instance does not start from a full bucket.
      // Bounded: Redis silent, the instance's own view decides (fail open), and the sync keeps trying in the background.
      const first = withTimeout(this.sync(tenantId), FIRST_SYNC_DEADLINE_MS).catch(() => {});
      fresh.first = first;
      void first.then(() => {
        if (fresh.first === first) fresh.first = undefined;
      });
    }
    const held = t;
    if (held.first) return held.first.then(() => this.decide(held, limit, n));
    return this.decide(held, limit, n);
  }

  private decide(t: Tenant, limit: PublishLimit, n: number): TakeResult {
    const now = this.opts.clock.now();
    t.limit = limit;
    t.lastUsed = now;
    const tokens = Math.min(limit.burst, t.level + ((now - t.syncedAt) * limit.ratePerS) / 1000) - t.pending - t.sending;
    if (tokens >= n) {
      t.pending += n;
      return { ok: true };
    }
    return { ok: false, retryAfterMs: Math.max(1, Math.ceil(((n - tokens) * 1000) / limit.ratePerS)) };
  }

  private syncAll(): void {
    const now = this.opts.clock.now();
    for (const [tenantId, t] of this.tenants) {
      if (t.pending === 0 && now - t.lastUsed > this.idleMs && !t.inFlight) this.tenants.delete(tenantId);
      else void this.sync(tenantId);
    }
  }

  private sync(tenantId: string): Promise<void> {
    const t = this.tenants.get(tenantId);
    if (!t || t.inFlight) return Promise.resolve();
    t.inFlight = true;
    t.sending = t.pending;
    t.pending = 0;
    const sentAt = this.opts.clock.now();
    return this.redis.relayTenantPublishSync(this.keyOf(tenantId), t.sending, 1000 / t.limit.ratePerS, t.limit.burst).then(
      (level) => {
        // Forgotten while this sync was on its way: it wrote the key back.
        if (this.tenants.get(tenantId) !== t) void this.redis.del(this.keyOf(tenantId)).catch(() => {});
        t.level = Number(level);
        t.syncedAt = sentAt;
        t.sending = 0;
        t.inFlight = false;
        t.first = undefined;
        this.opts.onSync?.(true);
      },
      (err: unknown) => {
        // Kept here: the next sync sends it again; meanwhile this instance's view decides alone.
        t.pending += t.sending;
        t.sending = 0;
        t.inFlight = false;
        t.first = undefined;
        this.opts.onSync?.(false);
        this.opts.logger.debug({ err: (err as Error).message }, 'tenant publish rate sync failed');
      },
    );
  }

  private keyOf(tenantId: string): string {
    return `${this.opts.prefix}tenant-publishes:${tenantId}`;
  }

  async forget(tenantId: string): Promise<void> {
    this.tenants.delete(tenantId);
    await this.redis.del(this.keyOf(tenantId));
  }

  close(): Promise<void> {
    clearInterval(this.timer);
    this.tenants.clear();
    return Promise.resolve();
  }
}
