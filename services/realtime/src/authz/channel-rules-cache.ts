import { LRUCache } from 'lru-cache';
import { RelayError, type Logger } from '@service-relay/core';
import { DEFAULT_CHANNEL_RULES, parseChannelRules, type ChannelRules } from '@service-relay/channels';
import type { TenantEvent, TenantFeedView } from '@service-relay/tenant-events';
import type { ChannelRulesSource, FetchedChannelRules } from './channel-rules-source';

/**
 * A tenant's channel rules for the decision: synchronous when they are known
 * and trusted (the hot path: no await on a publish), a promise when they must
 * be asked for first. The promise rejects with `unavailable` when they cannot
 * be had: the caller refuses the request (fail closed), it never falls back.
 */
export type ChannelRulesLookup = (tenantId: string) => ChannelRules | Promise<ChannelRules>;

/** Every tenant the default rules: for tests and tools that run realtime without a registry. */
export const DEFAULT_RULES_LOOKUP: ChannelRulesLookup = () => DEFAULT_CHANNEL_RULES;

interface Entry {
  rules: ChannelRules;
  version: number;
}

export interface ChannelRulesCacheOptions {
  source: ChannelRulesSource;
  feed: TenantFeedView;
  logger: Logger;
  /** Tenants kept (least recently used go first); default 10 000. */
  max?: number;
}

/** Registry answers older than a rules change this instance applied are asked again this often, then refused. */
const MAX_ATTEMPTS = 3;

/**
 * Per-tenant channel rules in realtime (docs/ARCHITECTURE.md "Channel rules").
 * Filled on a tenant's first request by asking the registry, then kept
 * current by the tenant feed: a `channel_rules` change sets the tenant's rules
 * when its version is newer than the one held, before the feed reports the
 * change applied (so the admin call's 200 means every instance decides with
 * them). Versions only grow, and the highest seen wins: a slow first-use
 * answer cannot overwrite a newer feed change. While the feed is not current
 * no entry is trusted (every lookup asks the registry); a feed reset drops
 * everything.
 */
export class ChannelRulesCache {
  private readonly entries: LRUCache<string, Entry>;
  private readonly inflight = new Map<string, Promise<ChannelRules>>();
  /**
   * The latest feed sequence of a channel_rules change applied here. An answer
   * read before it might lack that change, whose entry may have been evicted
   * since: such an answer is asked again rather than stored.
   */
  private appliedSeq = -1;
  private lastError = '';

  constructor(private readonly opts: ChannelRulesCacheOptions) {
    this.entries = new LRUCache<string, Entry>({ max: opts.max ?? 10_000 });
  }

  readonly lookup: ChannelRulesLookup = (tenantId) => {
    if (this.opts.feed.isCurrent()) {
      const hit = this.entries.get(tenantId);
      if (hit) return hit.rules;
    }
    return this.fetch(tenantId);
  };

  /** A tenant feed change (a feed handler: it resolves before the change counts as applied). */
  onEvent(event: TenantEvent): void {
    // A deleted tenant's rules are gone with it (a late lookup asks the registry, which knows no such tenant).
    if (event.kind === 'deleted') {
      this.entries.delete(event.tenant_id);
      return;
    }
    if (event.kind !== 'channel_rules') return;
    const detail = event.detail ?? {};
    const rules = parseChannelRules(detail.rules);
    const version = detail.rules_version;
    // Thrown, the feed stops at this change and this instance stops being current: lookups go to the registry.
    if (typeof rules === 'string' || typeof version !== 'number' || !Number.isSafeInteger(version)) {
      throw new Error(`channel_rules change ${event.seq} is unreadable${typeof rules === 'string' ? `: ${rules}` : ''}`);
    }
    this.appliedSeq = Math.max(this.appliedSeq, event.seq);
    this.keep(event.tenant_id, { rules, version });
  }

  /** The feed lost its place: nothing held can be proven fresh. */
  onReset(): void {
    this.entries.clear();
  }

  /** Tenants held (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  private keep(tenantId: string, next: Entry): Entry {
    const held = this.entries.peek(tenantId);
    if (held && held.version >= next.version) return held;
    this.entries.set(tenantId, next);
    return next;
  }

  /** One registry question per tenant at a time; callers arriving meanwhile share it. */
  private fetch(tenantId: string): Promise<ChannelRules> {
    let pending = this.inflight.get(tenantId);
    if (!pending) {
      pending = this.ask(tenantId).finally(() => this.inflight.delete(tenantId));
      this.inflight.set(tenantId, pending);
    }
    return pending;
  }

  private async ask(tenantId: string): Promise<ChannelRules> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      let answer: FetchedChannelRules | undefined;
      try {
        answer = await this.opts.source.fetch(tenantId);
      } catch (err) {
        this.failed((err as Error).message, tenantId);
        throw new RelayError('unavailable', 'channel rules unavailable', { cause: err });
      }
      // A verified token of a tenant the registry does not know: nothing to decide with.
      if (!answer) throw new RelayError('unavailable', 'channel rules of an unknown tenant');
      this.lastError = '';
      // An answer read before a change this instance applied (or before its feed's base) may lack it: ask again.
      if (answer.asOfSeq < Math.max(this.opts.feed.baseSeq(), this.appliedSeq)) continue;
      // The feed may have brought a newer version meanwhile: the higher one is kept and used.
      return this.keep(tenantId, { rules: answer.rules, version: answer.version }).rules;
    }
    throw new RelayError('unavailable', 'channel rules answers kept lagging the tenant feed');
  }

  private failed(message: string, tenantId: string): void {
    if (message !== this.lastError) this.opts.logger.warn({ err: message, tenant_id: tenantId }, 'channel rules not available; refusing the request');
    this.lastError = message;
  }
}
