import { RelayError, type Logger } from '@service-relay/core';
import type { CallbackSettings } from '@service-relay/channels';
import { FeedFollowingCache, type TenantEvent, type TenantFeedView } from '@service-relay/tenant-events';

/** A tenant's callbacks as realtime uses them: the settings and the signing secrets (current first). */
export interface TenantCallbacks {
  settings: CallbackSettings;
  secrets: readonly string[];
}

/** The registry's answer: null callbacks for a tenant that has none. */
export interface FetchedCallbacks {
  callbacks: TenantCallbacks | null;
  version: number;
  asOfSeq: number;
}

/** Where realtime asks for a tenant's callbacks (TenantFeed.TenantCallbacks; a memory source in tests); undefined for an unknown tenant. */
export interface CallbacksSource {
  fetch(tenantId: string): Promise<FetchedCallbacks | undefined>;
  close(): void;
}

/**
 * Per-tenant callbacks in realtime: a FeedFollowingCache of `callbacks`
 * changes. Those carry only the new version (the secret never travels in
 * the feed), so a change drops the tenant's entry and the next request asks
 * the registry, before the feed reports the change applied. Fail closed,
 * like channel rules: a registry that cannot say whether the tenant has
 * callbacks refuses the request (`unavailable`), never skips the host.
 */
export class CallbackSettingsCache {
  private readonly cache: FeedFollowingCache<TenantCallbacks | null>;

  constructor(opts: { source: CallbacksSource; feed: TenantFeedView; logger: Logger; max?: number }) {
    this.cache = new FeedFollowingCache<TenantCallbacks | null>({
      what: 'tenant callbacks',
      consequence: 'refusing the request',
      kind: 'callbacks',
      fromChange: (event) => {
        const version = event.detail?.callbacks_version;
        if (typeof version !== 'number' || !Number.isSafeInteger(version)) throw new Error(`callbacks change ${event.seq} is unreadable`);
        return { version };
      },
      fetch: async (tenantId) => {
        const answer = await opts.source.fetch(tenantId);
        return answer && { value: answer.callbacks, version: answer.version, asOfSeq: answer.asOfSeq };
      },
      unavailable: (_tenantId, err) => {
        throw new RelayError('unavailable', 'tenant callbacks unavailable', { cause: err });
      },
      feed: opts.feed,
      logger: opts.logger,
      ...(opts.max !== undefined && { max: opts.max }),
    });
  }

  lookup(tenantId: string): TenantCallbacks | null | Promise<TenantCallbacks | null> {
    return this.cache.lookup(tenantId);
  }

  onEvent(event: TenantEvent): void {
    this.cache.onEvent(event);
  }

  onReset(): void {
    this.cache.onReset();
  }
}
