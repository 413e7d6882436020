import type { Logger } from '@service-relay/core';
import { FeedFollowingCache, mergeLimits, parseLimits, type PartialLimits, type TenantEvent, type TenantFeedView, type TenantLimits } from '@service-relay/tenant-events';

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

/**
 * Per-tenant limits in realtime (#30; docs/OPERATIONS.md "Plans and
 * per-tenant limits"): the environment defaults <- the tenant's plan <- its
 * overrides, a FeedFollowingCache of `limits` changes (which carry the
 * layers), so the admin call's 200 means every instance enforces them.
 * Unlike channel rules, limits fail open: a registry that cannot answer
 * leaves the tenant on the defaults (asked again on its next use), never
 * refused for it; and a held entry is used while the feed is not current.
 */
export class TenantLimitsCache implements TenantLimitsView {
  private readonly cache: FeedFollowingCache<TenantLimits>;

  constructor(
    readonly defaults: TenantLimits,
    opts: { source: LimitsSource; feed: TenantFeedView; logger: Logger; max?: number },
  ) {
    this.cache = new FeedFollowingCache<TenantLimits>({
      what: 'tenant limits',
      consequence: 'the defaults apply until they are',
      kind: 'limits',
      fromChange: (event) => {
        const detail = event.detail ?? {};
        const doc = parseLimits(detail.limits);
        const version = detail.limits_version;
        if (typeof doc === 'string' || typeof version !== 'number' || !Number.isSafeInteger(version)) {
          throw new Error(`limits change ${event.seq} is unreadable${typeof doc === 'string' ? `: ${doc}` : ''}`);
        }
        return { value: mergeLimits(defaults, doc), version };
      },
      fetch: async (tenantId) => {
        const answer = await opts.source.fetch(tenantId);
        return answer && { value: mergeLimits(defaults, answer.limits), version: answer.version, asOfSeq: answer.asOfSeq };
      },
      unavailable: () => defaults,
      onlyWhileCurrent: false,
      feed: opts.feed,
      logger: opts.logger,
      ...(opts.max !== undefined && { max: opts.max }),
    });
  }

  get(tenantId: string): TenantLimits {
    const hit = this.cache.lookup(tenantId);
    return hit instanceof Promise ? this.defaults : hit;
  }

  load(tenantId: string): TenantLimits | Promise<TenantLimits> {
    return this.cache.lookup(tenantId);
  }

  /** A tenant feed change (a feed handler: applied before the change counts as applied). */
  onEvent(event: TenantEvent): void {
    this.cache.onEvent(event);
  }

  onReset(): void {
    this.cache.onReset();
  }

  get size(): number {
    return this.cache.size;
  }
}
