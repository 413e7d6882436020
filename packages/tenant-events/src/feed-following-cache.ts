import { LRUCache } from 'lru-cache';
import type { Logger } from '@service-relay/core';
import type { TenantEvent, TenantEventKind } from './tenant-event';
import type { TenantFeedView } from './tenant-feed';

/** A tenant's state as the registry answered it, with the feed sequence the answer reflects. */
export interface FetchedState<V> {
  value: V;
  /** Per tenant, only ever growing. */
  version: number;
  /** The tenant feed sequence the answer reflects, read in the same snapshot. */
  asOfSeq: number;
}

/** What a change of the followed kind says: the new state itself, or only that the held one is stale (`value` absent: ask again). */
export interface StateChange<V> {
  version: number;
  value?: V;
}

export interface FeedFollowingCacheOptions<V> {
  /** For the log line of a failed question: "<what> not available; <consequence>". */
  what: string;
  consequence: string;
  /** The change kind that carries this state. */
  kind: TenantEventKind;
  /** Reads such a change; throws when it cannot (the feed stops there and the instance stops being current). */
  fromChange(event: TenantEvent): StateChange<V>;
  /** Asks the registry; undefined for a tenant it does not know. */
  fetch(tenantId: string): Promise<FetchedState<V> | undefined>;
  /**
   * What a lookup gets when the registry cannot say (down, unknown tenant,
   * answers lagging the feed): a value (fail open, e.g. the defaults) or a
   * throw (fail closed, e.g. `unavailable`). `err` is undefined for an
   * unknown tenant or a lagging answer.
   */
  unavailable(tenantId: string, err: Error | undefined): V;
  feed: TenantFeedView;
  logger: Logger;
  /** Entries are used only while the feed is current (else every lookup asks); default true. */
  onlyWhileCurrent?: boolean;
  /** Tenants kept (least recently used go first); default 10 000. */
  max?: number;
}

/** Answers older than a change this instance applied are asked again this often, then given up on. */
const MAX_ATTEMPTS = 3;

/**
 * One tenant state that realtime follows through the tenant feed (channel
 * rules, limits, callbacks): filled on a tenant's first use by asking the
 * registry, then kept by the feed's changes of one kind before the feed
 * reports them applied (so an admin call's 200 means every instance uses the
 * new state). Versions only grow and the highest seen wins: a slow first
 * answer cannot overwrite a newer change. An answer read before a change of
 * this kind applied here (or before the feed's base after a reset) is asked
 * again. A hit is synchronous; concurrent misses of one tenant share one
 * question. A reset drops everything; `deleted` drops the tenant.
 */
export class FeedFollowingCache<V> {
  private readonly entries: LRUCache<string, { value: V; version: number }>;
  private readonly inflight = new Map<string, Promise<V>>();
  private appliedSeq = -1;
  private lastError = '';

  constructor(private readonly opts: FeedFollowingCacheOptions<V>) {
    this.entries = new LRUCache({ max: opts.max ?? 10_000 });
  }

  /** The held value when it may be used, else undefined (no question asked). */
  peek(tenantId: string): V | undefined {
    if (this.opts.onlyWhileCurrent !== false && !this.opts.feed.isCurrent()) return undefined;
    return this.entries.get(tenantId)?.value;
  }

  /** Synchronous when held and usable (the hot path); otherwise the registry's answer, or what `unavailable` says. */
  lookup(tenantId: string): V | Promise<V> {
    if (this.opts.onlyWhileCurrent === false || this.opts.feed.isCurrent()) {
      const hit = this.entries.get(tenantId);
      if (hit) return hit.value;
    }
    let pending = this.inflight.get(tenantId);
    if (!pending) {
      pending = this.ask(tenantId).finally(() => this.inflight.delete(tenantId));
      this.inflight.set(tenantId, pending);
    }
    return pending;
  }

  /** A tenant feed change (a feed handler: it returns before the change counts as applied). */
  onEvent(event: TenantEvent): void {
    if (event.kind === 'deleted') {
      this.entries.delete(event.tenant_id);
      return;
    }
    if (event.kind !== this.opts.kind) return;
    const change = this.opts.fromChange(event);
    this.appliedSeq = Math.max(this.appliedSeq, event.seq);
    const held = this.entries.peek(event.tenant_id);
    if (held && held.version >= change.version) return;
    if (change.value === undefined) this.entries.delete(event.tenant_id);
    else this.entries.set(event.tenant_id, { value: change.value, version: change.version });
  }

  /** The feed lost its place: nothing held can be proven fresh. */
  onReset(): void {
    this.entries.clear();
  }

  /** Tenants held (tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  private async ask(tenantId: string): Promise<V> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      let answer: FetchedState<V> | undefined;
      try {
        answer = await this.opts.fetch(tenantId);
      } catch (err) {
        const message = (err as Error).message;
        if (message !== this.lastError) this.opts.logger.warn({ err: message, tenant_id: tenantId }, `${this.opts.what} not available; ${this.opts.consequence}`);
        this.lastError = message;
        return this.opts.unavailable(tenantId, err as Error);
      }
      this.lastError = '';
      if (!answer) return this.opts.unavailable(tenantId, undefined);
      // Read before a change this instance applied (or before its feed's base): it may lack it.
      if (answer.asOfSeq < Math.max(this.opts.feed.baseSeq(), this.appliedSeq)) continue;
      const held = this.entries.peek(tenantId);
      // The feed may have brought a newer version meanwhile: the higher one is kept and used.
      if (held && held.version >= answer.version) return held.value;
      this.entries.set(tenantId, { value: answer.value, version: answer.version });
      return answer.value;
    }
    return this.opts.unavailable(tenantId, undefined);
  }
}
