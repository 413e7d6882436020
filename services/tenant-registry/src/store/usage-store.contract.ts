import { randomUUID } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../db/db';
import type { StoreHarness } from './tenant-store.contract';
import { emptyCounts, UsageStore, type UsageFlushRow } from './usage-store';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2030-01-01T00:00:00.000Z');

function row(tenantId: string, hourMs: number, over: Partial<UsageFlushRow> = {}): UsageFlushRow {
  return { ...emptyCounts(), tenantId, hourMs, ...over };
}

/** The usage store on every Db driver: usage-store.test.ts (PGlite), usage-store.int.test.ts (PostgreSQL). */
export function usageStoreContract(driver: string, makeHarness: () => Promise<StoreHarness>): void {
  describe(`usage store on ${driver}`, () => {
    const clock = new ManualClock(T0 + 3 * DAY);
    let harness: StoreHarness;
    let db: Db;
    let store: UsageStore;

    beforeAll(async () => {
      harness = await makeHarness();
      db = await harness.open();
      store = new UsageStore(db, clock);
    });
    afterAll(async () => {
      await db?.close();
      await harness?.destroy();
    });

    it('applies a flush once however often it is retried, and merges rows of one tenant and hour', async () => {
      const t = randomUUID();
      const flush = {
        flushId: `i1:${randomUUID()}`,
        instanceId: 'i1',
        rows: [
          row(t, T0, { publishedWs: 3, publishedRest: 2, publishedHost: 1, deliveries: 10, bytesIn: 100, bytesOut: 900, peakConnections: 2, connectionMs: 60_000, refusals: { publish_rate: 2 } }),
          row(t, T0, { publishedWs: 1, peakConnections: 4, refusals: { publish_rate: 1, subscriptions: 1 } }),
        ],
      };
      expect(await store.applyFlush(flush)).toBe('applied');
      expect(await store.applyFlush(flush)).toBe('duplicate');
      const [b] = await store.tenantUsage(t, T0, T0 + HOUR, 'hour');
      expect(b).toEqual({
        startMs: T0,
        publishedRest: 2,
        publishedWs: 4,
        publishedHost: 1,
        deliveries: 10,
        bytesIn: 100,
        bytesOut: 900,
        peakConnections: 4,
        connectionMs: 60_000,
        refusals: { publish_rate: 3, subscriptions: 1 },
      });
    });

    it('sums peaks over instances (each instance its own highest), sums hours into UTC days, and keeps the day peak as the busiest hour', async () => {
      const t = randomUUID();
      await store.applyFlush({ flushId: 'a:1', instanceId: 'a', rows: [row(t, T0, { peakConnections: 3, deliveries: 1 }), row(t, T0 + HOUR, { peakConnections: 1, deliveries: 2 })] });
      await store.applyFlush({ flushId: 'a:2', instanceId: 'a', rows: [row(t, T0, { peakConnections: 2, deliveries: 1 })] });
      await store.applyFlush({ flushId: 'b:1', instanceId: 'b', rows: [row(t, T0, { peakConnections: 5 }), row(t, T0 + DAY, { deliveries: 7, refusals: { tenant_connections: 1 } })] });
      const hours = await store.tenantUsage(t, T0, T0 + 2 * DAY, 'hour');
      expect(hours.map((h) => [h.startMs, h.peakConnections, h.deliveries])).toEqual([
        [T0, 8, 2],
        [T0 + HOUR, 1, 2],
        [T0 + DAY, 0, 7],
      ]);
      const days = await store.tenantUsage(t, T0, T0 + 2 * DAY, 'day');
      expect(days.map((d) => [d.startMs, d.peakConnections, d.deliveries, d.refusals])).toEqual([
        [T0, 8, 4, {}],
        [T0 + DAY, 0, 7, { tenant_connections: 1 }],
      ]);
      // `to` is exclusive; `from` cuts too.
      expect((await store.tenantUsage(t, T0 + HOUR, T0 + DAY, 'hour')).map((h) => h.startMs)).toEqual([T0 + HOUR]);
      expect(await store.tenantUsage('not-a-uuid', T0, T0 + DAY, 'hour')).toEqual([]);
    });

    it('lists every tenant sorted by a metric, descending then by id, a page at a time', async () => {
      const from = T0 + 2 * DAY;
      const ids = Array.from({ length: 5 }, () => randomUUID());
      const published = [5, 9, 1, 9, 3];
      await store.applyFlush({ flushId: `p:${randomUUID()}`, instanceId: 'p', rows: ids.map((t, i) => row(t, from, { publishedWs: published[i]!, bytesOut: 10 * (5 - i) })) });
      const expected = ids.map((t, i) => ({ t, p: published[i]! })).sort((a, b) => b.p - a.p || (a.t < b.t ? -1 : 1));
      const seen: string[] = [];
      let after;
      for (let pages = 0; pages < 10; pages++) {
        const page = await store.listUsage(from, from + DAY, 'day', 'published', 2, after);
        seen.push(...page.tenants.map((x) => x.tenantId));
        for (const x of page.tenants) expect(x.totals.publishedWs).toBe(x.buckets[0]!.publishedWs);
        after = page.next;
        if (!after) break;
      }
      expect(seen).toEqual(expected.map((e) => e.t));
      const byBytes = await store.listUsage(from, from + DAY, 'hour', 'bytes_out', 100, undefined);
      expect(byBytes.tenants.map((x) => x.tenantId)).toEqual(ids);
      expect(byBytes.next).toBeUndefined();
    });

    it('prunes hours older than the retention, purges one tenant, and keeps the rest', async () => {
      const old = randomUUID();
      const kept = randomUUID();
      const now = clock.now() - (clock.now() % HOUR);
      await store.applyFlush({ flushId: `r:${randomUUID()}`, instanceId: 'r', rows: [row(old, now - 2 * DAY, { deliveries: 1, peakConnections: 1, refusals: { x: 1 } }), row(old, now, { deliveries: 2 }), row(kept, now, { deliveries: 3, peakConnections: 2, refusals: { x: 1 } })] });
      expect(await store.prune(DAY)).toBeGreaterThanOrEqual(3);
      expect((await store.tenantUsage(old, 0, now + HOUR, 'hour')).map((b) => b.deliveries)).toEqual([2]);
      expect(await store.purgeTenantUsage(old)).toBe(1);
      expect(await store.tenantUsage(old, 0, now + HOUR, 'hour')).toEqual([]);
      expect((await store.tenantUsage(kept, 0, now + HOUR, 'hour'))[0]).toMatchObject({ deliveries: 3, peakConnections: 2, refusals: { x: 1 } });
    });

    it('refuses malformed flushes before the database', () => {
      const t = randomUUID();
      expect(UsageStore.problem({ flushId: 'a:1', instanceId: 'a', rows: [row(t, T0)] })).toBeUndefined();
      expect(UsageStore.problem({ flushId: 'a b', instanceId: 'a', rows: [] })).toBeDefined();
      expect(UsageStore.problem({ flushId: 'a:1', instanceId: 'a', rows: [row(t, T0 + 1)] })).toBeDefined();
      expect(UsageStore.problem({ flushId: 'a:1', instanceId: 'a', rows: [row(t, T0, { deliveries: -1 })] })).toBeDefined();
      expect(UsageStore.problem({ flushId: 'a:1', instanceId: 'a', rows: [row('x', T0)] })).toBeDefined();
      expect(UsageStore.problem({ flushId: 'a:1', instanceId: 'a', rows: [row(t, T0, { refusals: { 'Bad Name': 1 } })] })).toBeDefined();
    });
  });
}
