import { isRelayError } from '@service-relay/core';
import { createTestDatabase, type TestDatabase } from '@service-relay/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { FeedStore } from '../store/feed-store';
import { openDatabases, type RegistryDatabases } from './create-db';

describe('openDatabases on PostgreSQL', () => {
  let database: TestDatabase | undefined;
  let dbs: RegistryDatabases | undefined;
  afterEach(async () => {
    await dbs?.close();
    await database?.drop();
  });

  it('gives the tenant feed connections of its own: with every lookup connection taken, feed reads are still answered at once', async () => {
    database = await createTestDatabase('registry_pools');
    dbs = await openDatabases({ kind: 'postgres', url: database.url, pool: { max: 2, feedMax: 2, timeoutMs: 500 } });
    expect(dbs.feed).not.toBe(dbs.main);
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    const main = dbs.main;
    // A flood of lookups: every main connection busy, more waiting behind them.
    const holders = [0, 1].map(() => main.transaction(async (tx) => {
      await tx.query('SELECT 1');
      await held;
    }).catch(() => {}));
    const queued = main.query('SELECT 1').then(() => 'answered', (err: unknown) => (isRelayError(err) ? err.code : 'other'));
    const feed = new FeedStore(dbs.feed);
    const started = performance.now();
    const [seq, page] = await Promise.all([feed.latestSeq(), feed.changesSince(0, 10)]);
    await feed.recordConsumer('pool-test', 'test', seq, 2000);
    const feedMs = performance.now() - started;
    expect(page.reset).toBe(false);
    expect(feedMs, 'feed reads do not wait behind the lookups').toBeLessThan(300);
    expect(await queued, 'the lookup queued behind the busy pool is 503, not a hang').toBe('unavailable');
    release();
    await Promise.all(holders);
  });

});
