import { isCanonicalUuid, systemClock, type Clock } from '@service-relay/core';
import { channelRulesJson, DEFAULT_CHANNEL_RULES, parseChannelRules, type ChannelRules } from '@service-relay/channels';
import type { Db, Queryable } from '../db/db';
import type { CommittedChangeEvent } from '../tenants/tenant';
import type { FeedStore } from './feed-store';

/** A tenant's channel rules as stored: version 0 is the default no one set. */
export interface TenantChannelRules {
  tenantId: string;
  version: number;
  rules: ChannelRules;
}

/** What the tenant feed's ChannelRules RPC answers: the rules and the feed sequence they reflect. */
export interface ChannelRulesSnapshot extends TenantChannelRules {
  asOfSeq: number;
}

/** A committed rules change with its tenant feed record. */
export interface ChannelRulesChange {
  rules: TenantChannelRules;
  event: CommittedChangeEvent;
}

/**
 * Per-tenant channel rules (migrations/005_channel_rules.sql). A write locks
 * the tenant row (as every tenant mutation does, so it serializes with them),
 * stores the canonical document with the next version and records a
 * `channel_rules` feed change carrying `{ rules, rules_version }`, all in one
 * transaction. The change's `version` is the tenant's state version, which a
 * rules change leaves as it is (tokens are not affected).
 */
export class ChannelRulesStore {
  constructor(
    private readonly db: Db,
    private readonly feed: FeedStore,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Undefined when the tenant does not exist. */
  async get(tenantId: string): Promise<TenantChannelRules | undefined> {
    const snapshot = await this.snapshot(tenantId);
    return snapshot && { tenantId: snapshot.tenantId, version: snapshot.version, rules: snapshot.rules };
  }

  /** The rules and, read in the same statement, the feed sequence they reflect. Undefined when the tenant does not exist. */
  async snapshot(tenantId: string): Promise<ChannelRulesSnapshot | undefined> {
    if (!isCanonicalUuid(tenantId)) return undefined;
    const rows = await this.db.query<{ rules: unknown; version: string | number | null; as_of_seq: string | number }>(
      `SELECT r.rules, r.version, (SELECT seq FROM feed_state WHERE id = 1) AS as_of_seq
         FROM tenants t LEFT JOIN tenant_channel_rules r ON r.tenant_id = t.tenant_id
        WHERE t.tenant_id = $1 AND t.deleted_at IS NULL`,
      [tenantId],
    );
    const row = rows[0];
    if (!row) return undefined;
    return { tenantId, version: row.version === null ? 0 : Number(row.version), rules: storedRules(row.rules), asOfSeq: Number(row.as_of_seq) };
  }

  /** Sets the tenant's rules (`null`: back to the default). Undefined when the tenant does not exist. */
  set(tenantId: string, rules: ChannelRules | null): Promise<ChannelRulesChange | undefined> {
    if (!isCanonicalUuid(tenantId)) return Promise.resolve(undefined);
    return this.db.transaction(async (tx) => {
      const [tenant] = await tx.query<{ version: string | number }>('SELECT version FROM tenants WHERE tenant_id = $1 AND deleted_at IS NULL FOR UPDATE', [tenantId]);
      if (!tenant) return undefined;
      const version = await this.nextVersion(tx, tenantId);
      const doc = rules === null ? null : JSON.stringify(channelRulesJson(rules));
      await tx.query(
        `INSERT INTO tenant_channel_rules (tenant_id, rules, version, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant_id) DO UPDATE SET rules = excluded.rules, version = excluded.version, updated_at = excluded.updated_at`,
        [tenantId, doc, version, new Date(this.clock.now()).toISOString()],
      );
      const effective = rules ?? DEFAULT_CHANNEL_RULES;
      const event = { kind: 'channel_rules' as const, version: Number(tenant.version), revokedKeyVersions: [], detail: { rules: channelRulesJson(effective), rules_version: version } };
      const seq = await this.feed.record(tx, tenantId, event);
      return { rules: { tenantId, version, rules: effective }, event: { ...event, seq } };
    });
  }

  private async nextVersion(tx: Queryable, tenantId: string): Promise<number> {
    const [row] = await tx.query<{ version: string | number }>('SELECT version FROM tenant_channel_rules WHERE tenant_id = $1', [tenantId]);
    return row ? Number(row.version) + 1 : 1;
  }
}

/** A stored document was validated when written; one that no longer parses is a fault, not a silent default. */
function storedRules(value: unknown): ChannelRules {
  if (value === null || value === undefined) return DEFAULT_CHANNEL_RULES;
  const parsed = parseChannelRules(typeof value === 'string' ? JSON.parse(value) : value);
  if (typeof parsed === 'string') throw new Error(`stored channel rules do not parse: ${parsed}`);
  return parsed;
}
