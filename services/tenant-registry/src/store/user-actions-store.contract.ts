import { randomBytes, randomUUID } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import type { Db } from '../db/db';
import type { StoreHarness } from './tenant-store.contract';
import { TenantStore } from './tenant-store';

/**
 * A host's user actions on every Db driver: user-actions-store.test.ts
 * (PGlite), user-actions-store.int.test.ts (PostgreSQL).
 */
export function userActionsStoreContract(driver: string, makeHarness: () => Promise<StoreHarness>): void {
  describe(`user actions store on ${driver}`, () => {
    const NOW_S = Date.parse('2030-01-01T00:00:00.000Z') / 1000;
    const clock = new ManualClock(NOW_S * 1000);
    let harness: StoreHarness;
    let db: Db;
    let store: TenantStore;

    beforeAll(async () => {
      harness = await makeHarness();
      db = await harness.open();
      store = new TenantStore(db, new TenantCrypto(randomBytes(32)), clock);
    });
    afterAll(async () => {
      await db?.close();
      await harness?.destroy();
    });

    it('a revocation raises the tenant version, keeps the latest moment per lowercase user, and reaches the keys in one read', async () => {
      const { tenant } = await store.create();
      const user = randomUUID();
      const first = await store.users.revoke(tenant.tenantId, user.toUpperCase(), NOW_S - 100);
      expect(first).toMatchObject({ revocation: { userId: user, before: NOW_S - 100 }, event: { kind: 'user_revoked', version: tenant.version + 1, detail: { user_id: user, before: NOW_S - 100 } } });
      const earlier = await store.users.revoke(tenant.tenantId, user, NOW_S - 500);
      expect(earlier!.revocation.before).toBe(NOW_S - 100);
      expect(earlier!.event.version).toBe(tenant.version + 2);
      const later = await store.users.revoke(tenant.tenantId, user, NOW_S);
      expect(later!.revocation.before).toBe(NOW_S);
      const keys = await store.getKeys(tenant.tenantId);
      expect(keys!.version).toBe(tenant.version + 3);
      expect(keys!.userRevocations).toEqual([{ userId: user, before: NOW_S }]);
      expect(keys!.asOfSeq).toBe(later!.event.seq);
    });

    it('a disconnect records user_disconnected at the same version; unknown and malformed tenants are undefined', async () => {
      const { tenant } = await store.create();
      const user = randomUUID();
      expect(await store.users.disconnect(tenant.tenantId, user)).toMatchObject({ kind: 'user_disconnected', version: tenant.version, detail: { user_id: user } });
      expect((await store.getKeys(tenant.tenantId))!.userRevocations).toEqual([]);
      for (const id of [randomUUID(), 'nope']) {
        expect(await store.users.disconnect(id, user)).toBeUndefined();
        expect(await store.users.revoke(id, user, NOW_S)).toBeUndefined();
      }
    });

    it('prunes revocations older than the retention, and only those', async () => {
      const { tenant } = await store.create();
      const old = randomUUID();
      const recent = randomUUID();
      await store.users.revoke(tenant.tenantId, old, NOW_S - 10_000);
      await store.users.revoke(tenant.tenantId, recent, NOW_S - 10);
      expect(await store.users.prune(1000)).toBeGreaterThanOrEqual(1);
      expect((await store.getKeys(tenant.tenantId))!.userRevocations).toEqual([{ userId: recent, before: NOW_S - 10 }]);
    });
  });
}
