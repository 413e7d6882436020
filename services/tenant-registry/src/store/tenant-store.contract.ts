import { randomBytes } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import { HostSyncCheck } from '../tenants/host-sync-check';
import type { Db } from '../db/db';
import { migrate } from '../db/migrate';
import { TenantStore } from './tenant-store';

/** Opens the same storage again each time (PGlite directory or PostgreSQL database). */
export interface StoreHarness {
  open(): Promise<Db>;
  destroy(): Promise<void>;
}

/**
 * The behaviour every Db driver must give the tenant store. Registered once per
 * driver: tenant-store.test.ts (PGlite), tenant-store.int.test.ts (PostgreSQL).
 */
export function tenantStoreContract(driver: string, makeHarness: () => Promise<StoreHarness>): void {
  describe(`tenant store on ${driver}`, () => {
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

    it('creates a tenant with a fresh id, client id, secrets and version 1', async () => {
      const { tenant, hostSyncSecret, event } = await store.create();
      expect(tenant.tenantId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(tenant.hostSyncClientId).toMatch(/^hs_[0-9a-f]{32}$/);
      expect(hostSyncSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(tenant).toMatchObject({ disabled: false, version: 1, primaryKeyVersion: 1, previousKeyVersion: null });
      expect(event).toMatchObject({ kind: 'created', version: 1, revokedKeyVersions: [] });
      expect(await store.get(tenant.tenantId)).toEqual(tenant);
      const keys = await store.getKeys(tenant.tenantId);
      expect(keys?.primary.secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(keys).toMatchObject({ version: 1, disabled: false, primary: { keyVersion: 1 }, previous: null });
    });

    it('reports unknown and malformed ids as absent', async () => {
      expect(await store.get('7d4f1c1e-1b7a-4c38-9a55-2f7e0a4b9c10')).toBeUndefined();
      expect(await store.get('not-a-uuid')).toBeUndefined();
      expect(await store.rotate('7d4f1c1e-1b7a-4c38-9a55-2f7e0a4b9c10')).toBeUndefined();
      expect(await store.getKeys("x' OR 1=1 --")).toBeUndefined();
    });

    it('disables and enables; a repeated call is recorded again (it re-propagates), each change with the next feed sequence', async () => {
      const { tenant, event: created } = await store.create();
      const disabled = await store.setDisabled(tenant.tenantId, true);
      expect(disabled?.tenant).toMatchObject({ disabled: true, version: 2 });
      expect(disabled?.event).toEqual({ kind: 'disabled', version: 2, revokedKeyVersions: [], seq: created!.seq + 1 });
      const again = await store.setDisabled(tenant.tenantId, true);
      expect(again?.tenant).toMatchObject({ disabled: true, version: 3 });
      expect(again?.event).toEqual({ kind: 'disabled', version: 3, revokedKeyVersions: [], seq: created!.seq + 2 });
      const enabled = await store.setDisabled(tenant.tenantId, false);
      expect(enabled?.event).toEqual({ kind: 'enabled', version: 4, revokedKeyVersions: [], seq: created!.seq + 3 });
      const page = await store.feed.changesSince(created!.seq - 1, 10);
      expect(page.reset).toBe(false);
      expect(page.latestSeq).toBe(created!.seq + 3);
      expect(page.changes.map((c) => [c.seq, c.kind, c.version])).toEqual([
        [created!.seq, 'created', 1],
        [created!.seq + 1, 'disabled', 2],
        [created!.seq + 2, 'disabled', 3],
        [created!.seq + 3, 'enabled', 4],
      ]);
      expect((await store.getKeys(tenant.tenantId))?.asOfSeq).toBe(created!.seq + 3);
    });

    it("a consumer's poll records its report and reads what it lacks in one statement: current only once it has applied the latest", async () => {
      const consumer = `poll-${randomBytes(4).toString('hex')}`;
      const mine = async (seq: number) => (await store.feed.pendingConsumers(seq, 0)).filter((c) => c.consumerId === consumer);
      const { event: created } = await store.create();
      expect(await store.feed.recordAndRead(consumer, 'realtime', -1, 2000, 10)).toEqual({ latestSeq: created!.seq, changes: [], reset: false });
      const behind = await store.feed.recordAndRead(consumer, 'realtime', created!.seq - 1, 2000, 10);
      expect(behind).toEqual(await store.feed.changesSince(created!.seq - 1, 10));
      expect(behind.changes.map((c) => [c.seq, c.kind])).toEqual([[created!.seq, 'created']]);
      // Never current yet: a change committed now does not wait for it.
      const { event: next } = await store.create();
      expect(await mine(next!.seq)).toEqual([]);
      expect((await store.feed.recordAndRead(consumer, 'realtime', next!.seq, 2000, 10)).changes).toEqual([]);
      // Current at next.seq: the change after it waits for this consumer, which has applied next.seq.
      const { event: third } = await store.create();
      expect(await mine(third!.seq)).toEqual([{ consumerId: consumer, kind: 'realtime', appliedSeq: next!.seq }]);
      expect((await store.feed.recordAndRead(consumer, 'realtime', next!.seq + 5_000_000, 2000, 10)).reset).toBe(true);
    });

    it('rotates: the old primary becomes the previous, replacing any previous', async () => {
      const { tenant } = await store.create();
      const before = await store.getKeys(tenant.tenantId);
      const first = await store.rotate(tenant.tenantId);
      expect(first?.event).toMatchObject({ kind: 'rotated', version: 2, revokedKeyVersions: [] });
      const afterFirst = await store.getKeys(tenant.tenantId);
      expect(afterFirst?.previous).toEqual(before?.primary);
      expect(afterFirst?.primary.keyVersion).toBe(2);
      expect(afterFirst?.primary.secret).not.toBe(before?.primary.secret);
      const second = await store.rotate(tenant.tenantId);
      expect(second?.event).toMatchObject({ kind: 'rotated', version: 3, revokedKeyVersions: [1] });
      const afterSecond = await store.getKeys(tenant.tenantId);
      expect(afterSecond?.previous).toEqual(afterFirst?.primary);
    });

    it('expires the previous secret; without one it changes no secret but is recorded again', async () => {
      const { tenant } = await store.create();
      expect((await store.expirePrevious(tenant.tenantId))?.event).toMatchObject({ kind: 'previous_expired', version: 2, revokedKeyVersions: [] });
      await store.rotate(tenant.tenantId);
      const expired = await store.expirePrevious(tenant.tenantId);
      expect(expired?.event).toMatchObject({ kind: 'previous_expired', version: 4, revokedKeyVersions: [1] });
      expect(expired?.tenant.previousKeyVersion).toBeNull();
      expect((await store.getKeys(tenant.tenantId))?.previous).toBeNull();
    });

    it('revokes all: new primary, no previous, new host-sync secret', async () => {
      const created = await store.create();
      const id = created.tenant.tenantId;
      await store.rotate(id);
      const before = await store.getKeys(id);
      const revoked = await store.revokeAll(id);
      expect(revoked?.event).toMatchObject({ kind: 'revoked_all', version: 3, revokedKeyVersions: [2, 1] });
      expect(revoked?.hostSyncSecret).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const after = await store.getKeys(id);
      expect(after?.previous).toBeNull();
      expect(after?.primary.keyVersion).toBe(3);
      expect([before?.primary.secret, before?.previous?.secret]).not.toContain(after?.primary.secret);
      const cred = await store.findHostSyncCredential(id);
      const hasher = new TenantCrypto(secretsKey).hostSync;
      expect(hasher.matches(created.hostSyncSecret, cred!.secretHash)).toBe(false);
      expect(hasher.matches(revoked!.hostSyncSecret!, cred!.secretHash)).toBe(true);
    });

    it('rotates the host-sync secret without touching tokens', async () => {
      const created = await store.create();
      const keys = await store.getKeys(created.tenant.tenantId);
      clock.advance(1000);
      const rotated = await store.rotateHostSync(created.tenant.tenantId);
      expect(rotated?.event).toBeUndefined();
      expect(rotated?.tenant.version).toBe(1);
      expect(rotated?.tenant.updatedAt.getTime()).toBe(created.tenant.createdAt.getTime() + 1000);
      expect(rotated?.hostSyncSecret).not.toBe(created.hostSyncSecret);
      expect(await store.getKeys(created.tenant.tenantId)).toEqual(keys);
    });

    it('rotates the host-sync secret with an overlap (#33): both accepted until expire_previous_host_sync; a plain rotation or revoke_all ends it', async () => {
      const check = new HostSyncCheck(store, new TenantCrypto(secretsKey).hostSync);
      const created = await store.create();
      const id = created.tenant.tenantId;
      const clientId = created.tenant.hostSyncClientId;
      const accepts = async (secret: string) => (await check.authenticate(id, { clientId, secret })) === true;
      const overlap = await store.rotateHostSync(id, true);
      expect(overlap?.event).toBeUndefined();
      expect(overlap?.tenant).toMatchObject({ version: 1, hasPreviousHostSync: true });
      expect([await accepts(created.hostSyncSecret), await accepts(overlap!.hostSyncSecret!)]).toEqual([true, true]);
      // A second overlap replaces the previous: only the last two secrets work.
      const again = await store.rotateHostSync(id, true);
      expect([await accepts(created.hostSyncSecret), await accepts(overlap!.hostSyncSecret!), await accepts(again!.hostSyncSecret!)]).toEqual([false, true, true]);
      const expired = await store.expirePreviousHostSync(id);
      expect(expired?.tenant.hasPreviousHostSync).toBe(false);
      expect([await accepts(overlap!.hostSyncSecret!), await accepts(again!.hostSyncSecret!)]).toEqual([false, true]);
      // Expiring with nothing to expire changes nothing but the time.
      expect((await store.expirePreviousHostSync(id))?.tenant.hasPreviousHostSync).toBe(false);
      const third = await store.rotateHostSync(id, true);
      const plain = await store.rotateHostSync(id);
      expect(plain?.tenant.hasPreviousHostSync).toBe(false);
      expect([await accepts(again!.hostSyncSecret!), await accepts(third!.hostSyncSecret!), await accepts(plain!.hostSyncSecret!)]).toEqual([false, false, true]);
      const fourth = await store.rotateHostSync(id, true);
      const revoked = await store.revokeAll(id);
      expect(revoked?.tenant.hasPreviousHostSync).toBe(false);
      expect([await accepts(plain!.hostSyncSecret!), await accepts(fourth!.hostSyncSecret!), await accepts(revoked!.hostSyncSecret!)]).toEqual([false, false, true]);
      // A disabled tenant's previous secret is refused like its current one.
      const last = await store.rotateHostSync(id, true);
      await store.setDisabled(id, true);
      expect([await accepts(revoked!.hostSyncSecret!), await accepts(last!.hostSyncSecret!)]).toEqual([false, false]);
    });

    it('serializes ten simultaneous rotations: one primary, one previous, no lost version', async () => {
      const { tenant } = await store.create();
      const results = await Promise.all(Array.from({ length: 10 }, () => store.rotate(tenant.tenantId)));
      expect(results.map((r) => r?.event?.version).sort((a, b) => a! - b!)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
      // Each rotation revoked the previous it replaced, and no version twice.
      const revoked = results.flatMap((r) => r?.event?.revokedKeyVersions ?? []).sort((a, b) => a - b);
      expect(revoked).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
      const keys = await store.getKeys(tenant.tenantId);
      expect(keys).toMatchObject({ version: 11, primary: { keyVersion: 11 }, previous: { keyVersion: 10 } });
      expect(keys?.primary.secret).not.toBe(keys?.previous?.secret);
    });

    it('pages through tenants in creation order with an opaque position', async () => {
      clock.advance(60_000);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await store.create()).tenant.tenantId);
      const seen: string[] = [];
      let page = await store.list(2);
      seen.push(...page.tenants.map((t) => t.tenantId));
      while (page.next) {
        page = await store.list(2, page.next);
        seen.push(...page.tenants.map((t) => t.tenantId));
      }
      expect(new Set(seen).size).toBe(seen.length);
      // Same created_at for the last five: ties are broken by tenant id.
      expect(seen.slice(-5)).toEqual([...ids].sort());
    });

    it('keeps no plaintext JWT or host-sync secret in the table', async () => {
      const created = await store.create();
      const id = created.tenant.tenantId;
      await store.rotate(id);
      const keys = await store.getKeys(id);
      const rows = await db.query('SELECT * FROM tenants WHERE tenant_id = $1', [id]);
      const raw = JSON.stringify(rows);
      for (const secret of [created.hostSyncSecret, keys!.primary.secret, keys!.previous!.secret]) {
        expect(raw).not.toContain(secret);
        expect(raw).not.toContain(Buffer.from(secret).toString('base64'));
        expect(raw).not.toContain(Buffer.from(secret).toString('hex'));
      }
      expect(rows[0]).toMatchObject({ primary_secret: expect.stringMatching(/^v1\./), previous_secret: expect.stringMatching(/^v1\./) });
    });

    it('keeps everything across a restart, and does not re-apply migrations', async () => {
      const created = await store.create();
      const id = created.tenant.tenantId;
      await store.rotate(id);
      const keys = await store.getKeys(id);
      await db.close();
      db = await harness.open();
      store = new TenantStore(db, new TenantCrypto(secretsKey), clock);
      expect(await migrate(db)).toEqual([]);
      expect(await store.getKeys(id)).toEqual(keys);
      const cred = await store.findHostSyncCredential(id);
      expect(new TenantCrypto(secretsKey).hostSync.matches(created.hostSyncSecret, cred!.secretHash)).toBe(true);
    });

    it('cannot open secrets under another SECRETS_KEY', async () => {
      const { tenant } = await store.create();
      const other = new TenantStore(db, new TenantCrypto(randomBytes(32)), clock);
      await expect(other.getKeys(tenant.tenantId)).rejects.toThrow();
    });
  });
}
