import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../db/db';
import { AuditStore, type AuditEntry } from './audit-store';

/**
 * What the audit store must do on every Db driver: audit-store.test.ts
 * (PGlite), audit-store.int.test.ts (PostgreSQL). `open` gives a migrated database.
 */
export function auditStoreContract(driver: string, open: () => Promise<{ db: Db; destroy(): Promise<void> }>): void {
  describe(`audit store on ${driver}`, () => {
    const A = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';
    const B = '0b9c8d7e-6f50-4e55-8a2f-6f1d2a7e3c1b';
    let db: Db;
    let destroy: () => Promise<void>;
    let store: AuditStore;
    const entry = (i: number, tenantId: string | null): AuditEntry => ({
      actor: i % 2 ? 'current:1a2b3c4d' : 'next:5e6f7a8b',
      action: 'disable',
      method: 'POST',
      tenantId,
      status: 200,
      error: null,
      requestId: `req-${i}`,
      clientAddress: '::1',
      suppressed: 0,
    });

    beforeAll(async () => {
      ({ db, destroy } = await open());
      store = new AuditStore(db);
      for (let i = 1; i <= 7; i++) await store.insert(entry(i, i % 3 === 0 ? null : i % 2 ? A : B));
      await store.insert({ ...entry(8, null), actor: 'unauthenticated', status: 401, error: 'invalid_admin_token', suppressed: 41, clientAddress: null });
    });
    afterAll(async () => {
      await db?.close();
      await destroy?.();
    });

    it('lists newest first and pages by id, of all rows or one tenant', async () => {
      const first = await store.list(3);
      expect(first.records.map((r) => r.requestId)).toEqual(['req-8', 'req-7', 'req-6']);
      expect(first.records[0]).toMatchObject({ actor: 'unauthenticated', status: 401, error: 'invalid_admin_token', suppressed: 41, clientAddress: null, tenantId: null });
      expect(first.records[1]).toMatchObject({ actor: 'current:1a2b3c4d', action: 'disable', method: 'POST', tenantId: A, status: 200, error: null, clientAddress: '::1', suppressed: 0 });
      expect(first.records[0]!.at).toBeInstanceOf(Date);
      const rest = await store.list(10, first.next!);
      expect(rest.records.map((r) => r.requestId)).toEqual(['req-5', 'req-4', 'req-3', 'req-2', 'req-1']);
      expect(rest.next).toBeNull();
      expect((await store.list(5, undefined, { tenantId: A })).records.map((r) => r.requestId)).toEqual(['req-7', 'req-5', 'req-1']);
      const b = await store.list(1, undefined, { tenantId: B });
      expect(b.records.map((r) => r.requestId)).toEqual(['req-4']);
      expect((await store.list(1, b.next!, { tenantId: B })).records.map((r) => r.requestId)).toEqual(['req-2']);
    });

    it('filters by actions, outcome and time, newest first, paging within the filter', async () => {
      expect((await store.list(10, undefined, { outcome: 'refused' })).records.map((r) => r.requestId)).toEqual(['req-8']);
      expect((await store.list(10, undefined, { outcome: 'failed' })).records).toEqual([]);
      expect((await store.list(10, undefined, { actions: ['disable'], outcome: 'ok', tenantId: A })).records.map((r) => r.requestId)).toEqual(['req-7', 'req-5', 'req-1']);
      expect((await store.list(10, undefined, { actions: ['rotate', 'enable'] })).records).toEqual([]);
      // Row i answered at 2030-01-01T00:00:0i (the database's clock is microseconds; these are exact).
      await db.query(`UPDATE admin_audit_log SET at = timestamptz '2030-01-01T00:00:00Z' + substring(request_id from 5)::int * interval '1 second'`);
      const since = await store.list(1, undefined, { since: new Date('2030-01-01T00:00:07Z') });
      expect(since.records.map((r) => r.requestId)).toEqual(['req-8']);
      expect((await store.list(1, since.next!, { since: new Date('2030-01-01T00:00:07Z') })).records.map((r) => r.requestId)).toEqual(['req-7']);
      expect((await store.list(100, undefined, { until: new Date('2030-01-01T00:00:03Z') })).records.map((r) => r.requestId)).toEqual(['req-2', 'req-1']);
      expect((await store.list(100, undefined, { since: new Date('2030-01-01T00:00:09Z') })).records).toEqual([]);
    });

    it('prunes rows older than the retention on the database clock, and nothing newer', async () => {
      await db.query(`UPDATE admin_audit_log SET at = now() - interval '91 days' WHERE request_id IN ('req-1', 'req-2')`);
      expect(await store.prune(90 * 86_400_000)).toBe(2);
      expect(await store.prune(90 * 86_400_000)).toBe(0);
      expect((await store.list(100)).records.map((r) => r.requestId)).toEqual(['req-8', 'req-7', 'req-6', 'req-5', 'req-4', 'req-3']);
    });
  });
}
