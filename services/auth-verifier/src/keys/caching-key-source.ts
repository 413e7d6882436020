import { clockedLru, RelayError, setUntil, withTimeout, type Clock, type Logger } from '@service-relay/core';
import type { LRUCache } from 'lru-cache';
import type { TenantEvent, TenantFeedView } from '@service-relay/tenant-events';
import { buildTenantKeys, type KnownTenant, type TenantKeys, type TenantKeysData, type UnknownTenant } from '../token/tenant-keys';
import type { KeyFetcher } from './key-fetcher';
import { nullObserver, type KeySource, type KeySourceObserver } from './key-source';
import { FetchLimiter } from './fetch-limiter';
import type { SharedKeyCache } from './shared-key-cache';

export interface CachingKeySourceOptions {
  fetcher: KeyFetcher;
  /** Omitted in the one-process default: nothing leaves the process. */
  shared?: SharedKeyCache | undefined;
  feed: TenantFeedView;
  clock: Clock;
  logger: Logger;
  ttlMs: number;
  maxEntries?: number;
  negativeTtlMs?: number;
  maxNegativeEntries?: number;
  /** Registry fetches at once, and queued behind them; beyond that a miss is `unavailable`. */
  maxConcurrentFetches?: number;
  maxQueuedFetches?: number;
  observer?: KeySourceObserver;
}

/** A registry answer older than a tenant event we already saw is fetched again, this often. */
const STALE_REFETCHES = 3;
const MAX_FLOORS = 100_000;
/** Applying a change never waits longer than this on the shared cache (a frozen Redis must not stall the feed). */
const SHARED_DROP_DEADLINE_MS = 250;
/**
 * A check asking for a feed position this replica has not applied yet waits
 * this long for the feed to get there (it pulls at once) before asking the
 * registry directly: after a change the replica is usually milliseconds behind.
 */
const CATCH_UP_MS = 500;

/**
 * in-process LRU (TTL) -> shared cache -> registry, with revocation from the
 * tenant feed (ARCHITECTURE.md "Verifier key cache"):
 * - a tenant change drops the tenant in every layer and raises its version
 *   floor, so neither a fetch in flight nor another replica's late write can
 *   bring older state back;
 * - a shared entry is used only when it reflects the feed at or after the
 *   point this replica's feed started (`as_of_seq >= baseSeq`): changes
 *   before that point this replica never saw, so it cannot judge older entries;
 * - a feed reset drops everything (the epoch makes fetches started before it
 *   unstorable);
 * - while the feed is not current (lease lost) no cache is trusted: every
 *   check fetches.
 * Faults only ever lead to a fetch or to `unavailable`, never to a verdict
 * from data the rules above would not serve.
 */
export class CachingKeySource implements KeySource {
  private readonly local: LRUCache<string, KnownTenant>;
  private readonly negative: LRUCache<string, UnknownTenant>;
  /** Evicted oldest-raised first (read with peek, so reads do not reorder). */
  private readonly floors: LRUCache<string, number>;
  private readonly inflight = new Map<string, Promise<TenantKeys>>();
  private readonly limiter: FetchLimiter;
  private readonly observer: KeySourceObserver;
  private readonly negativeTtlMs: number;
  private epoch = 0;
  private unsubscribe: (() => void)[] = [];

  constructor(private readonly opts: CachingKeySourceOptions) {
    // Expired entries stay (until evicted or dropped by a change) for stale-if-error: see lastKnown().
    this.local = clockedLru(opts.maxEntries ?? 10_000, opts.clock, { noDeleteOnStaleGet: true });
    this.negative = clockedLru(opts.maxNegativeEntries ?? 10_000, opts.clock);
    // A floor only has to outlive fetches in flight (seconds) and shared entries
    // (the TTL); the oldest of 100k floors is far past both.
    this.floors = clockedLru(MAX_FLOORS, opts.clock);
    this.negativeTtlMs = Math.min(opts.negativeTtlMs ?? 5_000, opts.ttlMs);
    this.limiter = new FetchLimiter(opts.maxConcurrentFetches ?? 64, opts.maxQueuedFetches ?? 1024);
    this.observer = opts.observer ?? nullObserver;
  }

  async start(): Promise<void> {
    this.unsubscribe.push(this.opts.feed.subscribe((e) => this.onEvent(e)));
    this.unsubscribe.push(this.opts.feed.onReset(() => this.dropAll('tenant feed reset')));
    await this.opts.shared?.start?.().catch((err: unknown) => {
      // Redis down at start: checks go to the registry until it is back.
      this.opts.logger.warn({ err: (err as Error).message }, 'shared key cache not reachable yet');
    });
  }

  peek(tenantId: string): TenantKeys | undefined {
    if (!this.opts.feed.isCurrent()) return undefined;
    const hit = this.local.get(tenantId);
    if (hit) {
      this.observer.hit('local');
      return hit;
    }
    const miss = this.negative.get(tenantId);
    if (miss) this.observer.hit('negative');
    return miss;
  }

  appliedSeq(): number {
    return this.opts.feed.appliedSeq();
  }

  get(tenantId: string, minSeq = 0): Promise<TenantKeys> {
    if (minSeq > this.opts.feed.appliedSeq()) return this.getAtLeast(tenantId, minSeq);
    const cached = this.peek(tenantId);
    if (cached) return Promise.resolve(cached);
    let p = this.inflight.get(tenantId);
    if (!p) {
      p = this.load(tenantId);
      const mine = p;
      this.inflight.set(tenantId, mine);
      const forget = () => {
        if (this.inflight.get(tenantId) === mine) this.inflight.delete(tenantId);
      };
      mine.then(forget, forget);
    }
    return p;
  }

  /**
   * A caller applied a change of this tenant at `minSeq` that this replica has
   * not: every layer here may predate it. Wait briefly for the feed (which then
   * drops what the change touched), else ask the registry, whose answer must
   * reflect `minSeq` (ARCHITECTURE.md "Verdict freshness").
   */
  private async getAtLeast(tenantId: string, minSeq: number): Promise<TenantKeys> {
    if (await this.opts.feed.whenApplied(minSeq, CATCH_UP_MS)) return this.get(tenantId);
    const data = await this.fetch(tenantId);
    if ((data.asOfSeq ?? 0) < minSeq) throw new RelayError('unavailable', 'registry state is behind the asked feed position');
    return buildTenantKeys(tenantId, data);
  }

  async readiness(): Promise<Record<string, boolean>> {
    const [registry, shared] = await Promise.all([this.opts.fetcher.ready(), this.opts.shared?.ready()]);
    return shared === undefined ? { registry } : { registry, redis: shared };
  }

  async close(): Promise<void> {
    for (const u of this.unsubscribe) u();
    this.unsubscribe = [];
    this.opts.fetcher.close();
    await this.opts.shared?.close();
  }

  /** Applied before the feed reports the change applied, so the admin call returns only after it. */
  async onEvent(event: TenantEvent): Promise<void> {
    this.raiseFloor(event.tenant_id, event.version);
    this.local.delete(event.tenant_id);
    this.negative.delete(event.tenant_id);
    this.inflight.delete(event.tenant_id);
    try {
      if (this.opts.shared) await withTimeout(this.opts.shared.drop(event.tenant_id, event.version), SHARED_DROP_DEADLINE_MS);
    } catch (err) {
      // Every replica that heard the event also holds the floor locally and
      // ignores older shared entries, so a failed shared drop cannot revive them.
      this.observer.fault('shared');
      this.opts.logger.warn({ err: (err as Error).message, tenant_id: event.tenant_id }, 'could not drop a tenant from the shared key cache');
    }
  }

  async dropAll(why: string): Promise<void> {
    this.epoch++;
    this.local.clear();
    this.negative.clear();
    this.inflight.clear();
    this.opts.logger.warn({ why }, 'dropping every cached tenant key');
    // The shared driver keeps retrying its own drop until it lands and serves nothing meanwhile.
    await this.opts.shared?.dropAll().catch(() => this.observer.fault('shared'));
  }

  private async load(tenantId: string): Promise<TenantKeys> {
    const epoch = this.epoch;
    const trusted = () => epoch === this.epoch && this.opts.feed.isCurrent();
    if (trusted() && this.opts.shared) {
      const fromShared = await this.readShared(tenantId);
      if (fromShared && trusted() && fromShared.data.version >= this.floor(tenantId) && (fromShared.data.asOfSeq ?? -1) >= this.opts.feed.baseSeq()) {
        this.observer.hit('shared');
        const keys = buildTenantKeys(tenantId, fromShared.data);
        this.remember(keys, this.opts.clock.now() + Math.min(fromShared.ttlMs, this.opts.ttlMs));
        return keys;
      }
    }
    for (let attempt = 0; attempt <= STALE_REFETCHES; attempt++) {
      let data: TenantKeysData;
      try {
        data = await this.fetch(tenantId);
      } catch (err) {
        const known = trusted() ? this.lastKnown(tenantId) : undefined;
        if (known) return known;
        throw err;
      }
      if (data.version < this.floor(tenantId)) continue;
      const keys = buildTenantKeys(tenantId, data);
      if (trusted()) this.store(tenantId, keys, data);
      return keys;
    }
    this.opts.logger.warn({ tenant_id: tenantId }, 'registry kept answering with state older than a tenant event');
    throw new RelayError('unavailable', 'registry state is behind the tenant events');
  }

  /**
   * Stale-if-error (RFC 5861's idea): an entry past its TTL while the
   * registry cannot answer (PostgreSQL down). Safe while the feed is current:
   * every change of the tenant applied here dropped its entry, so one still
   * held reflects every change up to the feed's applied position. Its age
   * only bounds memory and how often keys are refreshed in normal times.
   */
  private lastKnown(tenantId: string): KnownTenant | undefined {
    const held = this.local.peek(tenantId, { allowStale: true });
    if (!held || held.version < this.floor(tenantId)) return undefined;
    this.observer.hit('stale');
    return held;
  }

  private async readShared(tenantId: string) {
    try {
      return await this.opts.shared!.get(tenantId);
    } catch {
      this.observer.fault('shared');
      return undefined;
    }
  }

  private async fetch(tenantId: string): Promise<TenantKeysData> {
    try {
      const data = await this.limiter.run(() => this.opts.fetcher.fetch(tenantId));
      this.observer.hit('registry');
      return data;
    } catch (err) {
      this.observer.fault('registry');
      throw err instanceof RelayError ? err : new RelayError('unavailable', 'registry fetch failed', { cause: err });
    }
  }

  private store(tenantId: string, keys: TenantKeys, data: TenantKeysData): void {
    const now = this.opts.clock.now();
    if (!keys.found) {
      setUntil(this.negative, tenantId, keys, now + this.negativeTtlMs);
      return;
    }
    this.remember(keys, now + this.opts.ttlMs);
    this.opts.shared?.put(tenantId, data, this.opts.ttlMs).catch(() => this.observer.fault('shared'));
  }

  private remember(keys: TenantKeys, expiresAt: number): void {
    // Never removed here, even when the shared entry it came from is at the end
    // of its TTL (Redis answered PTTL 0): this is the copy lastKnown() serves
    // while the registry cannot answer. (Removing it once refused every check
    // of the tenant for the rest of a PostgreSQL outage.)
    if (keys.found) setUntil(this.local, keys.tenantId, keys, Math.max(expiresAt, this.opts.clock.now() + 1));
    else setUntil(this.negative, keys.tenantId, keys, Math.min(expiresAt, this.opts.clock.now() + this.negativeTtlMs));
  }

  private floor(tenantId: string): number {
    return this.floors.peek(tenantId) ?? 0;
  }

  private raiseFloor(tenantId: string, version: number): void {
    const current = this.floors.peek(tenantId);
    if (current !== undefined && current >= version) return;
    this.floors.set(tenantId, version);
  }
}
