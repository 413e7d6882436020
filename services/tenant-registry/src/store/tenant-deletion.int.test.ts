import { randomBytes } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import { createTestDatabase, type TestDatabase } from '@service-relay/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import { createDb } from '../db/create-db';
import type { Db } from '../db/db';
import { tenantDeletionContract } from './tenant-deletion.contract';
import { TenantStore } from './tenant-store';
import { emptyCounts, UsageStore } from './usage-store';

tenantDeletionContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});

// PGlite runs one transaction at a time; on PostgreSQL a usage flush and a deletion run side by side.
describe('a usage flush racing a tenant deletion on PostgreSQL', () => {
  const clock = new ManualClock(Date.parse('2030-01-01T00:00:00.000Z'));
  let database: TestDatabase;
  let db: Db;
  let deleter: pg.Client;

  beforeAll(async () => {
    database = await createTestDatabase('registry');
    db = await createDb({ kind: 'postgres', url: database.url });
    deleter = new pg.Client({ connectionString: database.url });
    await deleter.connect();
  });
  afterAll(async () => {
    await deleter?.end();
    await db?.close();
    await database?.drop();
  });

  it('adds nothing for a tenant whose deletion was in flight when the flush started, and keeps the other tenant\'s counts', async () => {
    const store = new TenantStore(db, new TenantCrypto(randomBytes(32)), clock);
    const gone = (await store.create({})).tenant.tenantId;
    const live = (await store.create({})).tenant.tenantId;
    const hour = clock.now() - (clock.now() % 3_600_000);
    const row = (tenantId: string) => ({ ...emptyCounts(), tenantId, hourMs: hour, deliveries: 3, connectionMs: 1000, peakConnections: 1 });

    // A deletion holds the tenant's row and has purged its usage, not committed yet (what TenantDeletionStore.delete does).
    await deleter.query('BEGIN');
    await deleter.query('SELECT 1 FROM tenants WHERE tenant_id = $1 FOR UPDATE', [gone]);
    await deleter.query('DELETE FROM tenant_usage WHERE tenant_id = $1', [gone]);
    await deleter.query("UPDATE tenants SET deleted_at = now(), disabled = true, primary_secret = NULL, previous_secret = NULL, previous_key_version = NULL, host_sync_secret_hash = NULL WHERE tenant_id = $1", [gone]);

    let settled = false;
    const flush = new UsageStore(db, clock).applyFlush({ flushId: `race:${randomBytes(4).toString('hex')}`, instanceId: 'race', rows: [row(gone), row(live)] });
    void flush.finally(() => (settled = true));
    // The flush either waits on the deletion's row lock (right) or finishes before the commit (the race): bounded at 5 s.
    const deadline = Date.now() + 5000;
    let waiting = false;
    for (let i = 0; i < 500 && !settled && !waiting && Date.now() < deadline; i++) {
      const [r] = (await deleter.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")).rows;
      waiting = Number(r!.n) > 0;
      if (!waiting) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect({ waiting, settled }).toEqual({ waiting: true, settled: false });
    await deleter.query('COMMIT');
    expect(await flush).toBe('applied');

    const usage = new UsageStore(db, clock);
    expect(await usage.tenantUsage(gone, 0, hour + 3_600_000, 'hour')).toEqual([]);
    expect(await db.query('SELECT 1 FROM tenant_usage_peaks WHERE tenant_id = $1', [gone])).toEqual([]);
    expect((await usage.tenantUsage(live, 0, hour + 3_600_000, 'hour'))[0]).toMatchObject({ deliveries: 3, peakConnections: 1 });
  });
});
