import type { WebhookEventType } from '@service-relay/webhook-events';
import type { FetchedWebhookInterest, WebhookInterestSource } from '../webhooks/webhook-interest';

/** The registry's TenantWebhooks answer, in memory: every tenant exists and wants nothing until `set`. */
export class MemoryWebhookInterest implements WebhookInterestSource {
  private readonly tenants = new Map<string, { events: WebhookEventType[]; version: number }>();
  /** Set: every fetch rejects (the registry cannot be reached). */
  failing = false;
  calls = 0;

  /** The next version of the tenant's set, as a `webhooks` change would carry it. */
  set(tenantId: string, events: WebhookEventType[]): { webhook_events: WebhookEventType[]; webhooks_version: number } {
    const entry = { events, version: (this.tenants.get(tenantId)?.version ?? 0) + 1 };
    this.tenants.set(tenantId, entry);
    return { webhook_events: entry.events, webhooks_version: entry.version };
  }

  async fetch(tenantId: string): Promise<FetchedWebhookInterest | undefined> {
    this.calls++;
    if (this.failing) throw new Error('registry unreachable (test)');
    return { ...(this.tenants.get(tenantId) ?? { events: [], version: 0 }), asOfSeq: Number.MAX_SAFE_INTEGER };
  }

  close(): void {}
}
