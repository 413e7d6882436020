import { RelayError } from '@service-relay/core';
import { callUnary, internalClient, internalMetadata, REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, type TenantWebhooksRequest, type TenantWebhooksResponse, type UnaryMethod } from '@service-relay/grpc';
import type * as grpc from '@grpc/grpc-js';
import { parseWebhookEvents, type FetchedWebhookInterest, type WebhookInterestSource } from '../webhooks/webhook-interest';

/** relay.registry.v1.TenantFeed/TenantWebhooks with the internal credential. An answer it cannot read is a failure (realtime then records every event). */
export class RegistryWebhooksClient implements WebhookInterestSource {
  private readonly client: grpc.Client & { TenantWebhooks: UnaryMethod<TenantWebhooksRequest, TenantWebhooksResponse> };
  private readonly metadata: grpc.Metadata;

  constructor(private readonly opts: { address: string; internalToken: string; deadlineMs: number }) {
    this.client = internalClient(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, opts.address, { 'grpc.max_reconnect_backoff_ms': 1_000 });
    this.metadata = internalMetadata(opts.internalToken);
  }

  async fetch(tenantId: string): Promise<FetchedWebhookInterest | undefined> {
    const res = await callUnary(this.client.TenantWebhooks.bind(this.client), { tenant_id: tenantId }, this.metadata, { deadlineMs: this.opts.deadlineMs, what: 'registry webhooks' });
    if (!res.found) return undefined;
    const events = parseWebhookEvents(res.events ?? []);
    if (!events) throw new RelayError('unavailable', 'registry webhooks: unreadable answer');
    return { events, version: Number(res.version), asOfSeq: Number(res.as_of_seq) };
  }

  close(): void {
    this.client.close();
  }
}
