import { RelayError, type Logger } from '@service-relay/core';
import { DEFAULT_CHANNEL_RULES, parseChannelRules, type ChannelRules } from '@service-relay/channels';
import { FeedFollowingCache, type TenantEvent, type TenantFeedView } from '@service-relay/tenant-events';
import type { ChannelRulesSource } from './channel-rules-source';

/**
 * A tenant's channel rules for the decision: synchronous when they are known
 * and trusted (the hot path: no await on a publish), a promise when they must
 * be asked for first. The promise rejects with `unavailable` when they cannot
 * be had: the caller refuses the request (fail closed), it never falls back.
 */
export type ChannelRulesLookup = (tenantId: string) => ChannelRules | Promise<ChannelRules>;

/** Every tenant the default rules: for tests and tools that run realtime without a registry. */
export const DEFAULT_RULES_LOOKUP: ChannelRulesLookup = () => DEFAULT_CHANNEL_RULES;

export interface ChannelRulesCacheOptions {
  source: ChannelRulesSource;
  feed: TenantFeedView;
  logger: Logger;
  /** Tenants kept (least recently used go first); default 10 000. */
  max?: number;
}

/**
 * Per-tenant channel rules in realtime (docs/ARCHITECTURE.md "Channel rules"):
 * a FeedFollowingCache of `channel_rules` changes, which carry the whole
 * document. While the feed is not current no entry is trusted (every lookup
 * asks the registry); a registry that cannot answer refuses the request
 * (`unavailable`), never the default.
 */
export class ChannelRulesCache {
  private readonly cache: FeedFollowingCache<ChannelRules>;

  constructor(opts: ChannelRulesCacheOptions) {
    this.cache = new FeedFollowingCache<ChannelRules>({
      what: 'channel rules',
      consequence: 'refusing the request',
      kind: 'channel_rules',
      fromChange: (event) => {
        const detail = event.detail ?? {};
        const rules = parseChannelRules(detail.rules);
        const version = detail.rules_version;
        // Thrown, the feed stops at this change and this instance stops being current: lookups go to the registry.
        if (typeof rules === 'string' || typeof version !== 'number' || !Number.isSafeInteger(version)) {
          throw new Error(`channel_rules change ${event.seq} is unreadable${typeof rules === 'string' ? `: ${rules}` : ''}`);
        }
        return { value: rules, version };
      },
      fetch: async (tenantId) => {
        const answer = await opts.source.fetch(tenantId);
        return answer && { value: answer.rules, version: answer.version, asOfSeq: answer.asOfSeq };
      },
      unavailable: (_tenantId, err) => {
        // An unknown tenant (a verified token of a tenant the registry does not know), a failure, or answers lagging the feed.
        throw new RelayError('unavailable', err ? 'channel rules unavailable' : 'channel rules of an unknown tenant, or answers lagging the tenant feed', { cause: err });
      },
      feed: opts.feed,
      logger: opts.logger,
      ...(opts.max !== undefined && { max: opts.max }),
    });
  }

  readonly lookup: ChannelRulesLookup = (tenantId) => this.cache.lookup(tenantId);

  /** A tenant feed change (a feed handler: it resolves before the change counts as applied). */
  onEvent(event: TenantEvent): void {
    this.cache.onEvent(event);
  }

  /** The feed lost its place: nothing held can be proven fresh. */
  onReset(): void {
    this.cache.onReset();
  }

  /** Tenants held (for tests and metrics). */
  get size(): number {
    return this.cache.size;
  }
}
