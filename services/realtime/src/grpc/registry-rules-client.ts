import { RelayError } from '@service-relay/core';
import { parseChannelRules } from '@service-relay/channels';
import { callUnary, internalClient, internalMetadata, REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, type ChannelRulesRequest, type ChannelRulesResponse, type UnaryMethod } from '@service-relay/grpc';
import type * as grpc from '@grpc/grpc-js';
import type { ChannelRulesSource, FetchedChannelRules } from '../authz/channel-rules-source';

export interface RegistryRulesClientOptions {
  address: string;
  internalToken: string;
  deadlineMs: number;
}

/** relay.registry.v1.TenantFeed/ChannelRules with the internal credential. An answer it cannot read is a failure (fail closed), never the default. */
export class RegistryRulesClient implements ChannelRulesSource {
  private readonly client: grpc.Client & { ChannelRules: UnaryMethod<ChannelRulesRequest, ChannelRulesResponse> };
  private readonly metadata: grpc.Metadata;

  constructor(private readonly opts: RegistryRulesClientOptions) {
    this.client = internalClient(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, opts.address, { 'grpc.max_reconnect_backoff_ms': 1_000 });
    this.metadata = internalMetadata(opts.internalToken);
  }

  async fetch(tenantId: string): Promise<FetchedChannelRules | undefined> {
    const res = await callUnary(this.client.ChannelRules.bind(this.client), { tenant_id: tenantId }, this.metadata, {
      deadlineMs: this.opts.deadlineMs,
      what: 'registry channel rules',
    });
    if (!res.found) return undefined;
    let rules: ReturnType<typeof parseChannelRules>;
    try {
      rules = parseChannelRules(JSON.parse(res.rules_json));
    } catch {
      rules = 'not JSON';
    }
    if (typeof rules === 'string') throw new RelayError('unavailable', `registry channel rules: unreadable answer (${rules})`);
    return { rules, version: Number(res.version), asOfSeq: Number(res.as_of_seq) };
  }

  close(): void {
    this.client.close();
  }
}
