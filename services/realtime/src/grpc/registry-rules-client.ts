import { parseChannelRules } from '@service-relay/core';
import { internalClient, internalMetadata, REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, type ChannelRulesRequest, type ChannelRulesResponse, type UnaryMethod } from '@service-relay/grpc';
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

  fetch(tenantId: string): Promise<FetchedChannelRules | undefined> {
    return new Promise((resolve, reject) => {
      this.client.ChannelRules({ tenant_id: tenantId }, this.metadata, { deadline: Date.now() + this.opts.deadlineMs }, (err, res) => {
        if (err || !res) return reject(new Error(`registry channel rules: ${err?.details ?? 'no answer'}`));
        if (!res.found) return resolve(undefined);
        let rules: ReturnType<typeof parseChannelRules>;
        try {
          rules = parseChannelRules(JSON.parse(res.rules_json));
        } catch {
          rules = 'not JSON';
        }
        if (typeof rules === 'string') return reject(new Error(`registry channel rules: unreadable answer (${rules})`));
        resolve({ rules, version: Number(res.version), asOfSeq: Number(res.as_of_seq) });
      });
    });
  }

  close(): void {
    this.client.close();
  }
}
