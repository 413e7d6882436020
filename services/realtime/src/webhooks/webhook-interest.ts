import type { Logger } from '@service-relay/core';
import { FeedFollowingCache, type TenantEvent, type TenantFeedView } from '@service-relay/tenant-events';
import { isWebhookEventType, WEBHOOK_EVENT_TYPES, type WebhookEventType } from '@service-relay/webhook-events';

/** What a tenant the registry could not answer for gets: every event (the sender drops what no endpoint wants). */
const ALL: ReadonlySet<WebhookEventType> = new Set(WEBHOOK_EVENT_TYPES);

/** The registry's answer: the event types the tenant's enabled endpoints want. */
export interface FetchedWebhookInterest {
  events: readonly WebhookEventType[];
  /** Per tenant, only ever growing. */
  version: number;
  asOfSeq: number;
}

/** Where realtime asks which webhook events a tenant wants (TenantFeed.TenantWebhooks; a memory source in tests); undefined for an unknown tenant. */
export interface WebhookInterestSource {
  fetch(tenantId: string): Promise<FetchedWebhookInterest | undefined>;
  close(): void;
}

/** Whether this instance records a tenant's event of one type (#32): the presence-shaped stores ask at each join and leave. */
export type WantsWebhookEvent = (tenantId: string, type: WebhookEventType) => boolean;

/** Parses the `webhook_events` of a change or an answer; undefined when it is not a list of event types. */
export function parseWebhookEvents(value: unknown): WebhookEventType[] | undefined {
  if (!Array.isArray(value) || !value.every(isWebhookEventType)) return undefined;
  return value as WebhookEventType[];
}

/**
 * Which webhook events each tenant wants (#32; docs/ARCHITECTURE.md
 * "Webhooks"): a FeedFollowingCache of `webhooks` changes, which carry the
 * set of event types the tenant's enabled endpoints want, applied before the
 * feed reports the change applied, so an admin call's 200 means every
 * instance records exactly those from then on.
 *
 * `wants` is asked where the counts change and must answer at once: it fails
 * open. A tenant not held (never seen here, evicted, or the feed not
 * current) has every event recorded (the registry's sender drops what no
 * endpoint wants) and is asked for in the background; a connection's
 * upgrade awaits `load` so that its tenant is normally held before its
 * first event. Recording an event nobody wants costs a little; not
 * recording one an endpoint wants would lose it.
 */
export class WebhookInterest {
  private readonly cache: FeedFollowingCache<ReadonlySet<WebhookEventType>>;
  private readonly feed: TenantFeedView;

  constructor(opts: { source: WebhookInterestSource; feed: TenantFeedView; logger: Logger; max?: number }) {
    this.feed = opts.feed;
    this.cache = new FeedFollowingCache<ReadonlySet<WebhookEventType>>({
      what: 'tenant webhook events',
      consequence: 'recording all of its events until they are',
      kind: 'webhooks',
      fromChange: (event) => {
        const events = parseWebhookEvents(event.detail?.webhook_events);
        const version = event.detail?.webhooks_version;
        if (!events || typeof version !== 'number' || !Number.isSafeInteger(version)) throw new Error(`webhooks change ${event.seq} is unreadable`);
        return { value: new Set(events), version };
      },
      fetch: async (tenantId) => {
        const answer = await opts.source.fetch(tenantId);
        return answer && { value: new Set(answer.events), version: answer.version, asOfSeq: answer.asOfSeq };
      },
      // Not stored: the next event of the tenant asks again.
      unavailable: () => ALL,
      feed: opts.feed,
      logger: opts.logger,
      ...(opts.max !== undefined && { max: opts.max }),
    });
  }

  readonly wants: WantsWebhookEvent = (tenantId, type) => {
    const held = this.cache.peek(tenantId);
    if (held) return held.has(type);
    if (this.feed.isCurrent()) void this.load(tenantId);
    return true;
  };

  /** Asks the registry unless the tenant is held; never rejects. */
  load(tenantId: string): void | Promise<unknown> {
    const v = this.cache.lookup(tenantId);
    return v instanceof Promise ? v.catch(() => undefined) : undefined;
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
