import { randomBytes, randomUUID } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import type { Db } from '../db/db';
import type { StoreHarness } from './tenant-store.contract';
import { TenantStore } from './tenant-store';
import { WebhookStore } from './webhook-store';

/**
 * The webhook store on every Db driver: webhook-store.test.ts (PGlite),
 * webhook-store.int.test.ts (PostgreSQL).
 */
export function webhookStoreContract(driver: string, makeHarness: () => Promise<StoreHarness>): void {
  describe(`webhook store on ${driver}`, () => {
    const clock = new ManualClock(Date.parse('2030-01-01T00:00:00.000Z'));
    let harness: StoreHarness;
    let db: Db;
    let tenants: TenantStore;
    let store: WebhookStore;
    const endpoint = (tenantId: string, events: string[]) => ({ endpointId: randomUUID(), tenantId, url: 'https://example.com/hook', events, secret: 'sealed', now: new Date(clock.now()) });

    beforeAll(async () => {
      harness = await makeHarness();
      db = await harness.open();
      tenants = new TenantStore(db, new TenantCrypto(randomBytes(32)), clock);
      store = new WebhookStore(db, tenants.feed);
    });
    afterAll(async () => {
      await db?.close();
      await harness?.destroy();
    });

    it('records a webhooks change, with the set of event types enabled endpoints want, exactly when a write moves that set', async () => {
      const { tenant } = await tenants.create();
      const t = tenant.tenantId;
      expect(await store.interest(t)).toEqual({ events: [], version: 0, asOfSeq: await tenants.feed.latestSeq() });
      const first = await store.create(endpoint(t, ['member_removed', 'channel_vacated']));
      if (first === undefined || first === 'too_many') throw new Error('not created');
      expect(first.change).toMatchObject({ kind: 'webhooks', version: tenant.version, detail: { webhook_events: ['channel_vacated', 'member_removed'], webhooks_version: 1 } });
      // The change is in the outbox, in the write's transaction.
      const [row] = await db.query<{ kind: string; detail: unknown }>('SELECT kind, detail FROM tenant_changes WHERE seq = $1', [first.change!.seq]);
      expect(row).toMatchObject({ kind: 'webhooks', detail: { webhook_events: ['channel_vacated', 'member_removed'], webhooks_version: 1 } });
      // A second endpoint wanting nothing new: no change.
      const second = await store.create(endpoint(t, ['channel_vacated']));
      if (second === undefined || second === 'too_many') throw new Error('not created');
      expect(second.change).toBeUndefined();
      // Switched off, the first one leaves only what the second wants; switched on again, the set grows back.
      const off = await store.setEnabled(t, first.result.endpointId, false, new Date(clock.now()));
      expect(off?.change?.detail).toEqual({ webhook_events: ['channel_vacated'], webhooks_version: 2 });
      expect((await store.setEnabled(t, first.result.endpointId, false, new Date(clock.now())))?.change).toBeUndefined();
      const on = await store.setEnabled(t, first.result.endpointId, true, new Date(clock.now()));
      expect(on?.change?.detail).toEqual({ webhook_events: ['channel_vacated', 'member_removed'], webhooks_version: 3 });
      // Deleting the second changes nothing; deleting the first empties the set.
      expect((await store.remove(t, second.result.endpointId))?.change).toBeUndefined();
      const gone = await store.remove(t, first.result.endpointId);
      expect(gone?.change?.detail).toEqual({ webhook_events: [], webhooks_version: 4 });
      expect(await store.interest(t)).toEqual({ events: [], version: 4, asOfSeq: gone!.change!.seq });
      // The tenant's state version is untouched: tokens are not affected.
      expect((await tenants.get(t))!.version).toBe(tenant.version);
    });

    it('answers the set and the feed position in one read; unknown endpoints, tenants and malformed ids are undefined', async () => {
      const { tenant } = await tenants.create();
      const t = tenant.tenantId;
      const created = await store.create(endpoint(t, ['user_connected', 'channel_occupied', 'user_connected']));
      if (created === undefined || created === 'too_many') throw new Error('not created');
      expect(await store.interest(t)).toEqual({ events: ['channel_occupied', 'user_connected'], version: 1, asOfSeq: created.change!.seq });
      for (const id of [randomUUID(), 'nope']) {
        expect(await store.interest(id)).toBeUndefined();
        expect(await store.create(endpoint(id, ['member_added']))).toBeUndefined();
        expect(await store.remove(id, created.result.endpointId)).toBeUndefined();
        expect(await store.setEnabled(id, created.result.endpointId, false, new Date(clock.now()))).toBeUndefined();
      }
      expect(await store.remove(t, randomUUID())).toBeUndefined();
      expect(await store.setEnabled(t, randomUUID(), false, new Date(clock.now()))).toBeUndefined();
    });
  });
}
