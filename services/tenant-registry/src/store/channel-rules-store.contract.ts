import { randomBytes } from 'node:crypto';
import { channelRulesJson, DEFAULT_CHANNEL_RULES, parseChannelRules, type ChannelRules } from '@service-relay/channels';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import type { Db } from '../db/db';
import type { StoreHarness } from './tenant-store.contract';
import { TenantStore } from './tenant-store';

const rules = (doc: unknown): ChannelRules => {
  const parsed = parseChannelRules(doc);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
};
const READ_ONLY = rules({ default: ['subscribe', 'history'], channels: [{ pattern: 'chat:*', actions: ['subscribe', 'publish'] }, { pattern: 'chat:ops', actions: [] }] });
const DEFAULT_DOC = channelRulesJson(DEFAULT_CHANNEL_RULES);

/**
 * What the channel rules store must do on every Db driver: channel-rules-store.test.ts
 * (PGlite) and channel-rules-store.int.test.ts (PostgreSQL).
 */
export function channelRulesStoreContract(driver: string, makeHarness: () => Promise<StoreHarness>): void {
  describe(`channel rules store on ${driver}`, () => {
    let harness: StoreHarness;
    let db: Db;
    let store: TenantStore;

    beforeAll(async () => {
      harness = await makeHarness();
      db = await harness.open();
      store = new TenantStore(db, new TenantCrypto(randomBytes(32)));
    });
    afterAll(async () => {
      await db?.close();
      await harness?.destroy();
    });

    it('gives a tenant that never had rules the default at version 0; an unknown or malformed tenant has none', async () => {
      const { tenant } = await store.create();
      expect(await store.channelRules.get(tenant.tenantId)).toEqual({ tenantId: tenant.tenantId, version: 0, rules: DEFAULT_CHANNEL_RULES });
      expect(await store.channelRules.get('7d4f1c1e-1b7a-4c38-9a55-2f7e0a4b9c10')).toBeUndefined();
      expect(await store.channelRules.get("x' OR 1=1 --")).toBeUndefined();
      expect(await store.channelRules.set('7d4f1c1e-1b7a-4c38-9a55-2f7e0a4b9c10', READ_ONLY)).toBeUndefined();
      expect(await store.channelRules.set('NOT-A-UUID', null)).toBeUndefined();
    });

    it('commits the rules, the next version and a channel_rules feed change in one go; a reset keeps counting', async () => {
      const { tenant, event: created } = await store.create();
      const set = await store.channelRules.set(tenant.tenantId, READ_ONLY);
      expect(set?.rules).toEqual({ tenantId: tenant.tenantId, version: 1, rules: READ_ONLY });
      // The tenant's state version is the token-relevant one: a rules change leaves it.
      expect(set?.event).toEqual({ kind: 'channel_rules', version: 1, revokedKeyVersions: [], detail: { rules: channelRulesJson(READ_ONLY), rules_version: 1 }, seq: created!.seq + 1 });
      expect(await store.channelRules.get(tenant.tenantId)).toEqual({ tenantId: tenant.tenantId, version: 1, rules: READ_ONLY });
      expect(await store.channelRules.snapshot(tenant.tenantId)).toMatchObject({ version: 1, asOfSeq: set!.event.seq });

      const reset = await store.channelRules.set(tenant.tenantId, null);
      expect(reset?.rules).toEqual({ tenantId: tenant.tenantId, version: 2, rules: DEFAULT_CHANNEL_RULES });
      expect(reset?.event.detail).toEqual({ rules: DEFAULT_DOC, rules_version: 2 });
      expect(await store.channelRules.get(tenant.tenantId)).toMatchObject({ version: 2, rules: DEFAULT_CHANNEL_RULES });
      expect((await store.get(tenant.tenantId))?.version).toBe(1);

      const page = await store.feed.changesSince(created!.seq, 10);
      expect(page.changes.map((c) => [c.kind, c.detail])).toEqual([
        ['channel_rules', { rules: channelRulesJson(READ_ONLY), rules_version: 1 }],
        ['channel_rules', { rules: DEFAULT_DOC, rules_version: 2 }],
      ]);
    });

    it('serializes simultaneous writes on one tenant: every version once, the last one stored', async () => {
      const { tenant } = await store.create();
      const docs = Array.from({ length: 8 }, (_, i) => rules({ channels: [{ pattern: `room-${i}`, actions: ['subscribe'] }] }));
      const results = await Promise.all(docs.map((d) => store.channelRules.set(tenant.tenantId, d)));
      expect(results.map((r) => r!.rules.version).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      const last = results.find((r) => r!.rules.version === 8)!;
      expect(await store.channelRules.get(tenant.tenantId)).toEqual(last.rules);
    });

    it('keeps the rules across a reopen of the storage', async () => {
      const { tenant } = await store.create();
      await store.channelRules.set(tenant.tenantId, READ_ONLY);
      await db.close();
      db = await harness.open();
      store = new TenantStore(db, new TenantCrypto(randomBytes(32)));
      expect(await store.channelRules.get(tenant.tenantId)).toEqual({ tenantId: tenant.tenantId, version: 1, rules: READ_ONLY });
    });
  });
}
