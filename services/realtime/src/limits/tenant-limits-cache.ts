import { LRUCache } from 'lru-cache';
import type { Logger } from '@service-relay/core';
import { mergeLimits, parseLimits, type PartialLimits, type TenantEvent, type TenantFeedView, type TenantLimits } from '@service-relay/tenant-events';

/** A tenant's plan and override layers as the registry answered them (TenantFeed.TenantLimits). */
export interface FetchedLimits {
  limits: PartialLimits;
  /** Per tenant, only ever growing; 0 while nothing was set. */
  version: number;
  /** The tenant feed sequence the answer reflects. */
  asOfSeq: number;
}

/** Where realtime asks for a tenant's limits when it holds none; undefined for a tenant the registry does not know. */
export interface LimitsSource {
  fetch(tenantId: string): Promise<FetchedLimits | undefined>;
  close(): void;
}

/**
 * A tenant's effective limits: synchronous when held (the hot path),
 * otherwise the defaults at once while they are asked for (`get`), or the
 * answer (`load`, used where an await costs nothing: a connect, a REST publish).
 */
export interface TenantLimitsView {
  readonly defaults: TenantLimits;
  get(tenantId: string): TenantLimits;
  load(tenantId: string): TenantLimits | Promise<TenantLimits>;
}

/** Every tenant the defaults: tests and tools without a registry. */
export function fixedLimits(defaults: TenantLimits): TenantLimitsView {
  return { defaults, get: () => defaults, load: () => defaults };
}

interface Entry {
  limits: TenantLimits;
  version: number;
}

const MAX_ATTEMPTS = 3;

/**
 * Per-tenant limits in realtime (#30; docs/OPERATIONS.md "Plans and
 * per-tenant limits"): the environment defaults <- the tenant's plan <- its
 * overrides. Filled on a tenant's first use by asking the registry, then kept
 * current by the tenant feed: a `limits` change replaces the tenant's entry
 * when its version is newer, before the feed reports the change applied (so
 * the admin call's 200 means every instance enforces it). Unlike channel
 * rules, limits fail open: a registry that cannot answer leaves the tenant on
 * the defaults (asked again on its next use), never refused for it.
 */
export class TenantLimitsCache implements TenantLimitsView {
  private readonly entries: LRUCache<string, Entry>;
  private readonly inflight = new Map<string, Promise<TenantLimits>>();
  private appliedSeq = -1;
  private lastError = '';

  constructor(
    readonly defaults: TenantLimits,
    private readonly opts: { source: LimitsSource; feed: TenantFeedView; logger: Logger; max?: number },
  ) {
    this.entries = new LRUCache<string, Entry>({ max: opts.max ?? 10_000 });
  }

  get(tenantId: string): TenantLimits {
    const hit = this.entries.get(tenantId);
    if (hit) return hit.limits;
    void this.load(tenantId);
    return this.defaults;
  }

  load(tenantId: string): TenantLimits | Promise<TenantLimits> {
    const hit = this.entries.get(tenantId);
    if (hit) return hit.limits;
    let pending = this.inflight.get(tenantId);
    if (!pending) {
      pending = this.ask(tenantId).finally(() => this.inflight.delete(tenantId));
      this.inflight.set(tenantId, pending);
    }
    return pending;
  }

  /** A tenant feed change (a feed handler: applied before the change counts as applied). */
  onEvent(event: TenantEvent): void {
    if (event.kind !== 'limits') return;
    const detail = event.detail ?? {};
    const doc = parseLimits(detail.limits);
    const version = detail.limits_version;
    if (typeof doc === 'string' || typeof version !== 'number' || !Number.isSafeInteger(version)) {
      throw new Error(`limits change ${event.seq} is unreadable${typeof doc === 'string' ? `: ${doc}` : ''}`);
    }
    this.appliedSeq = Math.max(this.appliedSeq, event.seq);
    this.keep(event.tenant_id, { limits: mergeLimits(this.defaults, doc), version });
  }

  onReset(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private keep(tenantId: string, next: Entry): Entry {
    const held = this.entries.peek(tenantId);
    if (held && held.version >= next.version) return held;
    this.entries.set(tenantId, next);
    return next;
  }

  private async ask(tenantId: string): Promise<TenantLimits> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      let answer: FetchedLimits | undefined;
      try {
        answer = await this.opts.source.fetch(tenantId);
      } catch (err) {
        const message = (err as Error).message;
        if (message !== this.lastError) this.opts.logger.warn({ err: message, tenant_id: tenantId }, 'tenant limits not available; the defaults apply until they are');
        this.lastError = message;
        return this.defaults;
      }
      this.lastError = '';
      if (!answer) return this.defaults;
      if (answer.asOfSeq < Math.max(this.opts.feed.baseSeq(), this.appliedSeq)) continue;
      return this.keep(tenantId, { limits: mergeLimits(this.defaults, answer.limits), version: answer.version }).limits;
    }
    return this.defaults;
  }
}
