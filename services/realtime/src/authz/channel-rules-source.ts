import type { ChannelRules } from '@service-relay/channels';

/** A tenant's channel rules as the registry answered them. */
export interface FetchedChannelRules {
  rules: ChannelRules;
  /** Per tenant, only ever growing; 0 while the operator never set rules. */
  version: number;
  /** The tenant feed sequence the answer reflects: every change up to it is in it. */
  asOfSeq: number;
}

/**
 * Where realtime asks for a tenant's current channel rules when it has none
 * it can trust (the registry's TenantFeed.ChannelRules; a memory source in
 * tests). Rejects when it cannot answer; undefined for a tenant the registry
 * does not know.
 */
export interface ChannelRulesSource {
  fetch(tenantId: string): Promise<FetchedChannelRules | undefined>;
  close(): void;
}
