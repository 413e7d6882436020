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

    it('routes a read in one statement to the enabled endpoints that want each event, in order, with the stream position; the due query hands each its batch', async () => {
      const [{ tenant: t1 }, { tenant: t2 }] = [await tenants.create(), await tenants.create()];
      const a = await store.create(endpoint(t1.tenantId, ['member_added', 'user_connected']));
      const b = await store.create(endpoint(t1.tenantId, ['member_added']));
      if (a === undefined || a === 'too_many' || b === undefined || b === 'too_many') throw new Error('not created');
      await store.setEnabled(t1.tenantId, b.result.endpointId, false, new Date(clock.now()));
      const ev = (tenantId: string, type: string, at: number) => ({ tenantId, type, eventId: randomUUID(), event: { type, n: at }, createdAt: new Date(clock.now() + at) });
      const read = [ev(t1.tenantId, 'member_added', 1), ev(t1.tenantId, 'channel_vacated', 2), ev(t2.tenantId, 'member_added', 3), ev(t1.tenantId, 'user_connected', 4), ev(t1.tenantId, 'member_added', 5)];
      const from = await store.streamPosition();
      expect(await store.route(read, from, '1700000000000-7')).toEqual({ routed: 3, stored: true });
      expect(await store.streamPosition()).toBe('1700000000000-7');
      // The same read stored again (its first storing answered too late for its caller): the
      // position has moved on from `from`, so nothing is stored twice under new event ids.
      const again = read.map((e) => ({ ...e, eventId: randomUUID() }));
      expect(await store.route(again, from, '1700000000000-7')).toEqual({ routed: 0, stored: false });
      expect(await store.streamPosition()).toBe('1700000000000-7');
      // Only the enabled endpoint that wants them, in the read's order; none for the switched-off one.
      expect((await store.queued(a.result.endpointId, 10)).map((d) => d.eventId)).toEqual([read[0]!.eventId, read[3]!.eventId, read[4]!.eventId]);
      expect(await store.queuedCount(b.result.endpointId)).toBe(0);
      const now = new Date(clock.now() + 10);
      const [due] = (await store.due(now, 2, [])).filter((d) => d.tenantId === t1.tenantId);
      expect(due).toMatchObject({ endpointId: a.result.endpointId, queued: 2, oldest: read[0]!.createdAt });
      expect(due!.batch.map((d) => [d.eventId, d.event, d.createdAt.getTime()])).toEqual([read[0], read[3]].map((e) => [e!.eventId, e!.event, e!.createdAt.getTime()]));
      expect((await store.due(now, 2, [a.result.endpointId])).filter((d) => d.tenantId === t1.tenantId)).toEqual([]);
      // A failure keeps the batch and holds the endpoint until its retry; a success removes what it delivered.
      const attempt = { attemptedAt: now, events: 2, firstEventId: due!.batch[0]!.eventId, latencyMs: 3 };
      await store.recordAttempt(a.result.endpointId, t1.tenantId, { ...attempt, status: 500, error: 'no', nextAttemptAt: new Date(now.getTime() + 1000), delivered: [], failures: 1, failingSince: now });
      expect((await store.due(now, 2, [])).filter((d) => d.tenantId === t1.tenantId)).toEqual([]);
      const later = new Date(now.getTime() + 1000);
      const [retry] = (await store.due(later, 2, [])).filter((d) => d.tenantId === t1.tenantId);
      expect(retry).toMatchObject({ failures: 1, failingSince: now, queued: 2 });
      await store.recordAttempt(a.result.endpointId, t1.tenantId, { ...attempt, attemptedAt: later, status: 200, error: null, nextAttemptAt: null, delivered: retry!.batch.map((d) => d.seq), failures: 0, failingSince: null });
      expect((await store.queued(a.result.endpointId, 10)).map((d) => d.eventId)).toEqual([read[4]!.eventId]);
      expect(await store.attempts(a.result.endpointId, 10)).toMatchObject([
        { status: 200, events: 2, nextAttemptAt: null },
        { status: 500, error: 'no', nextAttemptAt: new Date(now.getTime() + 1000) },
      ]);
      expect(await store.backlog()).toMatchObject({ queued: expect.any(Number), failing: expect.any(Number) });
    });

    it('keeps the last 100 attempts of an endpoint, newest first', async () => {
      const { tenant } = await tenants.create();
      const created = await store.create(endpoint(tenant.tenantId, ['member_added']));
      if (created === undefined || created === 'too_many') throw new Error('not created');
      const id = created.result.endpointId;
      for (let i = 0; i < 103; i++) {
        await store.recordAttempt(id, tenant.tenantId, { attemptedAt: new Date(clock.now() + i), events: 1, firstEventId: null, status: 500, error: String(i), latencyMs: 1, nextAttemptAt: null, delivered: [], failures: i + 1, failingSince: null });
      }
      const kept = await store.attempts(id, 1000);
      expect(kept).toHaveLength(100);
      expect(kept[0]!.error).toBe('102');
      expect(kept.at(-1)!.error).toBe('3');
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
