import { randomBytes, randomUUID } from 'node:crypto';
import { parseCallbackSettings, parseChannelRules, type CallbackSettings, type ChannelRules } from '@service-relay/channels';
import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import type { Db } from '../db/db';
import { PURGE_STEPS } from './tenant-deletion';
import { TenantStore } from './tenant-store';
import { emptyCounts, UsageStore } from './usage-store';
import { WebhookStore } from './webhook-store';
import type { StoreHarness } from './tenant-store.contract';

const CALLBACKS = parseCallbackSettings({ url: 'https://host.example/cb', subscribe: ['room:*'] }, false) as CallbackSettings;
const RULES = parseChannelRules({ default: ['subscribe', 'history'], channels: [{ pattern: 'chat:*', actions: ['subscribe', 'publish'] }] }) as ChannelRules;

/**
 * Deleting a tenant in the store (#30 item 4), the same on every Db driver:
 * tenant-deletion.test.ts (PGlite), tenant-deletion.int.test.ts (PostgreSQL).
 */
export function tenantDeletionContract(driver: string, makeHarness: () => Promise<StoreHarness>): void {
  describe(`tenant deletion on ${driver}`, () => {
    const secretsKey = randomBytes(32);
    const clock = new ManualClock(Date.parse('2030-01-01T00:00:00.000Z'));
    let harness: StoreHarness;
    let db: Db;
    let store: TenantStore;

    beforeAll(async () => {
      harness = await makeHarness();
      db = await harness.open();
      store = new TenantStore(db, new TenantCrypto(secretsKey), clock);
    });
    afterAll(async () => {
      await db?.close();
      await harness?.destroy();
    });

    /** Every row of every table that names the tenant, by table (the tombstone aside). */
    async function rowsOf(tenantId: string): Promise<Record<string, unknown[]>> {
      const out: Record<string, unknown[]> = {};
      for (const step of PURGE_STEPS) out[step.table] = await db.query(`SELECT * FROM ${step.table} WHERE tenant_id = $1`, [tenantId]);
      return out;
    }

    it('purges every per-tenant table, destroys the secrets in a tombstone and records a deleted change; another tenant is untouched', async () => {
      const a = await store.create({ name: 'Acme', labels: { plan: 'pro' } });
      const b = await store.create({ name: 'Other' });
      const id = a.tenant.tenantId;
      for (const t of [id, b.tenant.tenantId]) {
        await store.channelRules.set(t, RULES);
        await store.users.revoke(t, 'alice', 1_900_000_000);
        await store.limits.set(t, { replace: true, overrides: { max_subscriptions: 5 } });
        await store.callbacks.set(t, CALLBACKS);
        const hourMs = clock.now() - (clock.now() % 3_600_000);
        // Webhooks (#32): an endpoint, a queued event and an attempt in its log.
        const hooks = new WebhookStore(db, store.feed);
        const endpointId = randomUUID();
        await hooks.create({ endpointId, tenantId: t, url: 'https://example.com/hook', events: ['member_added'], secret: 'sealed', now: new Date(clock.now()) });
        expect(await hooks.route([{ tenantId: t, type: 'member_added', eventId: randomUUID(), event: { type: 'member_added' }, createdAt: new Date(clock.now()) }], await hooks.streamPosition(), '1-0')).toEqual({ routed: 1, stored: true });
        await hooks.recordAttempt(endpointId, t, { attemptedAt: new Date(clock.now()), events: 1, firstEventId: null, status: 500, error: 'x', latencyMs: 1, nextAttemptAt: null, delivered: [], failures: 1, failingSince: null });
        await new UsageStore(db, clock).applyFlush({ flushId: `i:${t}`, instanceId: 'i', rows: [{ ...emptyCounts(), tenantId: t, hourMs, deliveries: 1, peakConnections: 1, refusals: { subscriptions: 1 } }] });
      }
      await store.rotate(id);
      const version = (await store.get(id))!.version;
      const before = await rowsOf(id);
      expect(Object.values(before).every((rows) => rows.length === 1)).toBe(true);

      clock.advance(1000);
      const deleted = await store.delete(id);
      expect(deleted).toMatchObject({ tenantId: id, repeated: false, usageKept: false, purged: { tenant_channel_rules: 1, user_revocations: 1, tenant_limits: 1, tenant_callbacks: 1, tenant_usage: 1, tenant_usage_peaks: 1, tenant_usage_refusals: 1 }, kept: [] });
      expect(deleted!.deletedAt.toISOString()).toBe('2030-01-01T00:00:01.000Z');
      // The next version, naming both key versions (2 after the rotation, and 1).
      expect(deleted!.event).toMatchObject({ kind: 'deleted', version: version + 1, revokedKeyVersions: [2, 1] });

      expect(await rowsOf(id)).toEqual(Object.fromEntries(PURGE_STEPS.map((step) => [step.table, []])));
      const [tomb] = await db.query<Record<string, unknown>>('SELECT * FROM tenants WHERE tenant_id = $1', [id]);
      expect(tomb).toMatchObject({ primary_secret: null, previous_secret: null, previous_key_version: null, host_sync_secret_hash: null, name: null, labels: {}, disabled: true, version: version + 1 });
      expect(tomb!.deleted_at).not.toBeNull();
      const [change] = await db.query<{ kind: string; version: number }>('SELECT kind, version FROM tenant_changes WHERE seq = $1', [deleted!.event.seq]);
      expect(change).toMatchObject({ kind: 'deleted', version: version + 1 });

      // The other tenant keeps everything.
      const other = await rowsOf(b.tenant.tenantId);
      expect(Object.values(other).every((rows) => rows.length === 1)).toBe(true);
      expect(await store.get(b.tenant.tenantId)).toMatchObject({ name: 'Other' });
    });

    it('answers every other read and change of a deleted tenant as no such tenant', async () => {
      const { tenant } = await store.create();
      const id = tenant.tenantId;
      await store.delete(id);
      expect(await store.get(id)).toBeUndefined();
      expect(await store.getKeys(id)).toBeUndefined();
      expect(await store.findHostSyncCredential(id)).toBeUndefined();
      // The verifiers' lookup: no such tenant, at the deletion's version; asked again (after the host-sync miss), the same.
      const version = (await db.query<{ version: number }>('SELECT version FROM tenants WHERE tenant_id = $1', [id]))[0]!.version;
      for (let i = 0; i < 2; i++) expect(await store.keyAnswer(id)).toMatchObject({ tenantId: id, deleted: true, version: Number(version) });
      // A second store (another registry replica) has no negative cache entry: the tombstone itself reads as none.
      const replica = new TenantStore(db, new TenantCrypto(secretsKey), clock);
      expect(await replica.getKeys(id)).toBeUndefined();
      expect(await replica.findHostSyncCredential(id)).toBeUndefined();
      expect(await replica.get(id)).toBeUndefined();
      expect(await replica.setDisabled(id, false)).toBeUndefined();
      expect(await replica.rotate(id)).toBeUndefined();
      expect(await replica.revokeAll(id)).toBeUndefined();
      expect(await replica.rotateHostSync(id)).toBeUndefined();
      expect(await replica.updateMeta(id, { name: 'back' })).toBeUndefined();
      expect(await replica.channelRules.get(id)).toBeUndefined();
      expect(await replica.channelRules.set(id, RULES)).toBeUndefined();
      expect(await replica.users.revoke(id, 'bob', 1)).toBeUndefined();
      expect(await replica.users.disconnect(id, 'bob')).toBeUndefined();
      const listed: string[] = [];
      let page = await replica.list(100);
      listed.push(...page.tenants.map((t) => t.tenantId));
      for (let i = 0; i < 100 && page.next; i++) {
        page = await replica.list(100, page.next);
        listed.push(...page.tenants.map((t) => t.tenantId));
      }
      expect(listed).not.toContain(id);
    });

    it('is idempotent: a repeat keeps the first deleted_at, purges nothing more and records another change (a retry re-propagates)', async () => {
      const { tenant } = await store.create();
      const id = tenant.tenantId;
      const first = await store.delete(id, { keepUsage: true });
      clock.advance(5000);
      const again = await store.delete(id);
      expect(again).toMatchObject({ tenantId: id, repeated: true, usageKept: false, purged: { tenant_channel_rules: 0, user_revocations: 0 } });
      expect(again!.deletedAt).toEqual(first!.deletedAt);
      expect(again!.event).toMatchObject({ kind: 'deleted', version: first!.event.version + 1, revokedKeyVersions: [] });
      expect(again!.event.seq).toBeGreaterThan(first!.event.seq);
      expect(await store.delete('7d4f1c1e-1b7a-4c38-9a55-2f7e0a4b9c10')).toBeUndefined();
      expect(await store.delete('not-a-uuid')).toBeUndefined();
    });

    it('never hands a deleted id (or its host-sync client id) out again: the tombstone holds both', async () => {
      const { tenant } = await store.create();
      await store.delete(tenant.tenantId);
      await expect(
        db.query("INSERT INTO tenants (tenant_id, host_sync_client_id, host_sync_secret_hash, version, primary_key_version, primary_secret, created_at, updated_at) VALUES ($1, 'hs_x', 'h', 1, 1, 'v1.x', now(), now())", [tenant.tenantId]),
      ).rejects.toThrow();
      await expect(
        db.query("INSERT INTO tenants (tenant_id, host_sync_client_id, host_sync_secret_hash, version, primary_key_version, primary_secret, created_at, updated_at) VALUES (gen_random_uuid(), $1, 'h', 1, 1, 'v1.x', now(), now())", [tenant.hostSyncClientId]),
      ).rejects.toThrow();
      // A tombstone cannot hold a secret again, nor a live row lose its own.
      await expect(db.query("UPDATE tenants SET primary_secret = 'v1.x' WHERE tenant_id = $1", [tenant.tenantId])).rejects.toThrow();
      const live = await store.create();
      await expect(db.query('UPDATE tenants SET primary_secret = NULL WHERE tenant_id = $1', [live.tenant.tenantId])).rejects.toThrow();
    });

    it('rolls the whole deletion back when a purge step fails: nothing purged, no tombstone, no change', async () => {
      const { TenantDeletionStore } = await import('./tenant-deletion');
      const { tenant } = await store.create();
      const id = tenant.tenantId;
      await store.users.revoke(id, 'carol', 1_900_000_000);
      const latest = await store.feed.latestSeq();
      const broken = new TenantDeletionStore(db, store.feed, clock, [...PURGE_STEPS, { table: 'no_such_table', sql: 'DELETE FROM no_such_table WHERE tenant_id = $1 RETURNING 1' }]);
      await expect(broken.delete(id)).rejects.toThrow();
      expect((await rowsOf(id)).user_revocations).toHaveLength(1);
      expect(await store.get(id)).toBeDefined();
      expect(await store.feed.latestSeq()).toBe(latest);
    });

    it('drops usage an instance flushes after the deletion (it would bring purged rows back), and keeps other tenants\' counts of the same flush', async () => {
      const gone = (await store.create({})).tenant.tenantId;
      const live = (await store.create({})).tenant.tenantId;
      expect(await store.delete(gone)).toBeDefined();
      const usage = new UsageStore(db, clock);
      const hour = clock.now() - (clock.now() % 3_600_000);
      const row = (tenantId: string) => ({ ...emptyCounts(), tenantId, hourMs: hour, deliveries: 3, connectionMs: 1000 });
      expect(await usage.applyFlush({ flushId: `late:${randomBytes(4).toString('hex')}`, instanceId: 'late', rows: [row(gone), row(live)] })).toBe('applied');
      expect(await usage.tenantUsage(gone, 0, hour + 3_600_000, 'hour')).toEqual([]);
      expect((await usage.tenantUsage(live, 0, hour + 3_600_000, 'hour'))[0]).toMatchObject({ deliveries: 3 });
    });

    it('keeps usage rows when asked: a usage step is skipped and named as kept', async () => {
      const { TenantDeletionStore } = await import('./tenant-deletion');
      await db.exec('CREATE TABLE IF NOT EXISTS test_usage (tenant_id uuid NOT NULL, n integer NOT NULL)');
      const steps = [...PURGE_STEPS, { table: 'test_usage', sql: 'DELETE FROM test_usage WHERE tenant_id = $1 RETURNING 1', usage: true }];
      const deletion = new TenantDeletionStore(db, store.feed, clock, steps);
      const kept = (await store.create()).tenant.tenantId;
      const purged = (await store.create()).tenant.tenantId;
      for (const t of [kept, purged]) await db.query('INSERT INTO test_usage (tenant_id, n) VALUES ($1, 1), ($1, 2)', [t]);
      expect(await deletion.delete(kept, { keepUsage: true })).toMatchObject({ kept: ['tenant_usage', 'tenant_usage_peaks', 'tenant_usage_refusals', 'test_usage'], usageKept: true });
      expect(await deletion.delete(purged)).toMatchObject({ kept: [], purged: { test_usage: 2 } });
      expect(await db.query('SELECT tenant_id FROM test_usage WHERE tenant_id = $1', [kept])).toHaveLength(2);
      expect(await db.query('SELECT tenant_id FROM test_usage WHERE tenant_id = $1', [purged])).toHaveLength(0);
      // A later deletion without the flag purges what was kept.
      expect(await deletion.delete(kept)).toMatchObject({ purged: { test_usage: 2 }, repeated: true });
    });
  });
}
