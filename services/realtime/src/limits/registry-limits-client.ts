import { RelayError } from '@service-relay/core';
import { callUnary, internalClient, internalMetadata, REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, type TenantLimitsRequest, type TenantLimitsResponse, type UnaryMethod } from '@service-relay/grpc';
import { parseLimits } from '@service-relay/tenant-events';
import type * as grpc from '@grpc/grpc-js';
import type { FetchedLimits, LimitsSource } from './tenant-limits-cache';

/** relay.registry.v1.TenantFeed/TenantLimits with the internal credential. */
export class RegistryLimitsClient implements LimitsSource {
  private readonly client: grpc.Client & { TenantLimits: UnaryMethod<TenantLimitsRequest, TenantLimitsResponse> };
  private readonly metadata: grpc.Metadata;

  constructor(private readonly opts: { address: string; internalToken: string; deadlineMs: number }) {
    this.client = internalClient(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, opts.address, { 'grpc.max_reconnect_backoff_ms': 1_000 });
    this.metadata = internalMetadata(opts.internalToken);
  }

  async fetch(tenantId: string): Promise<FetchedLimits | undefined> {
    const res = await callUnary(this.client.TenantLimits.bind(this.client), { tenant_id: tenantId }, this.metadata, { deadlineMs: this.opts.deadlineMs, what: 'registry tenant limits' });
    if (!res.found) return undefined;
    let limits: ReturnType<typeof parseLimits>;
    try {
      limits = parseLimits(JSON.parse(res.limits_json));
    } catch {
      limits = 'not JSON';
    }
    if (typeof limits === 'string') throw new RelayError('unavailable', `registry tenant limits: unreadable answer (${limits})`);
    return { limits, version: Number(res.limits_version), asOfSeq: Number(res.as_of_seq) };
  }

  close(): void {
    this.client.close();
  }
}
