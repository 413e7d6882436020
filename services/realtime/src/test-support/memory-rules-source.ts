import { DEFAULT_CHANNEL_RULES, parseChannelRules, type ChannelRules } from '@service-relay/channels';
import type { ChannelRulesSource, FetchedChannelRules } from '../authz/channel-rules-source';

/**
 * The registry's ChannelRules answer, held in memory, for realtime tests
 * without a registry: every tenant exists and has the default rules at
 * version 0 until `set`. Share one between instances as they would share the
 * registry. Its answers reflect every change (`asOfSeq` as high as it goes)
 * unless a test says otherwise.
 */
export class MemoryRulesSource implements ChannelRulesSource {
  private readonly tenants = new Map<string, { rules: ChannelRules; version: number }>();
  asOfSeq = Number.MAX_SAFE_INTEGER;
  /** Set: every fetch rejects (the registry cannot be reached). */
  failing = false;
  calls = 0;

  /** The operator's document (as the admin API takes it) or null for the default; the version grows by one. */
  set(tenantId: string, doc: unknown): { rules: ChannelRules; version: number } {
    const parsed = doc === null ? DEFAULT_CHANNEL_RULES : parseChannelRules(doc);
    if (typeof parsed === 'string') throw new Error(`test rules do not parse: ${parsed}`);
    const entry = { rules: parsed, version: (this.tenants.get(tenantId)?.version ?? 0) + 1 };
    this.tenants.set(tenantId, entry);
    return entry;
  }

  async fetch(tenantId: string): Promise<FetchedChannelRules | undefined> {
    this.calls++;
    if (this.failing) throw new Error('registry unreachable (test)');
    const entry = this.tenants.get(tenantId) ?? { rules: DEFAULT_CHANNEL_RULES, version: 0 };
    return { ...entry, asOfSeq: this.asOfSeq };
  }

  close(): void {}
}
