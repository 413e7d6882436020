import { RelayError } from '@service-relay/core';
import { parseCallbackSettings } from '@service-relay/channels';
import { callUnary, internalClient, internalMetadata, REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, type TenantCallbacksRequest, type TenantCallbacksResponse, type UnaryMethod } from '@service-relay/grpc';
import type * as grpc from '@grpc/grpc-js';
import type { CallbacksSource, FetchedCallbacks } from '../callbacks/callback-settings-cache';

/** relay.registry.v1.TenantFeed/TenantCallbacks with the internal credential. An answer it cannot read is a failure (fail closed). */
export class RegistryCallbacksClient implements CallbacksSource {
  private readonly client: grpc.Client & { TenantCallbacks: UnaryMethod<TenantCallbacksRequest, TenantCallbacksResponse> };
  private readonly metadata: grpc.Metadata;

  constructor(private readonly opts: { address: string; internalToken: string; deadlineMs: number }) {
    this.client = internalClient(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, opts.address, { 'grpc.max_reconnect_backoff_ms': 1_000 });
    this.metadata = internalMetadata(opts.internalToken);
  }

  async fetch(tenantId: string): Promise<FetchedCallbacks | undefined> {
    const res = await callUnary(this.client.TenantCallbacks.bind(this.client), { tenant_id: tenantId }, this.metadata, {
      deadlineMs: this.opts.deadlineMs,
      what: 'registry callbacks',
    });
    if (!res.found) return undefined;
    const version = Number(res.version);
    const asOfSeq = Number(res.as_of_seq);
    if (res.settings_json === '') return { callbacks: null, version, asOfSeq };
    let settings: ReturnType<typeof parseCallbackSettings>;
    try {
      // As stored: the registry judged the URL under its own CALLBACK_ALLOW_HTTP; realtime judges it again when it calls.
      settings = parseCallbackSettings(JSON.parse(res.settings_json), true);
    } catch {
      settings = 'not JSON';
    }
    if (typeof settings === 'string' || res.secrets.length === 0) throw new RelayError('unavailable', `registry callbacks: unreadable answer (${typeof settings === 'string' ? settings : 'no secret'})`);
    return { callbacks: { settings, secrets: [...res.secrets] }, version, asOfSeq };
  }

  close(): void {
    this.client.close();
  }
}
