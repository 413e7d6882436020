import type { DatabaseSettings } from '../config';
import type { Db } from './db';
import { migrate } from './migrate';
import { DEFAULT_PG_OPTIONS, PgDb } from './pg-db';
import { PGliteDb } from './pglite-db';

/** Connections of the feed pool when no pool settings are given (config's DB_FEED_POOL_SIZE default). */
const DEFAULT_FEED_POOL_SIZE = 3;
/** Migrations and hourly pruning may take long on a big table: their own connection, a generous budget, no short-circuit. */
const MAINTENANCE_TIMEOUT_MS = 300_000;

/**
 * The registry's connections to PostgreSQL, split by what waits on them
 * (docs/ARCHITECTURE.md "Tenant registry"):
 * - `main`: admin calls, key lookups, host-sync checks, the audit log;
 * - `feed`: the tenant feed's reads and consumer reports, which keep the
 *   consumers' leases running, so a flood of lookups cannot queue them;
 * - `maintenance`: migrations and pruning.
 * With PGlite (one embedded connection) all three are the same database.
 */
export interface RegistryDatabases {
  main: Db;
  feed: Db;
  maintenance: Db;
  close(): Promise<void>;
}

/** Opens the configured databases and brings the schema up to date. */
export async function openDatabases(settings: DatabaseSettings): Promise<RegistryDatabases> {
  if (settings.kind === 'pglite') {
    const db = await PGliteDb.open(settings.dir);
    await migrateOrClose(db, [db]);
    return { main: db, feed: db, maintenance: db, close: () => db.close() };
  }
  const { max, feedMax, timeoutMs } = settings.pool ?? { max: DEFAULT_PG_OPTIONS.max, feedMax: DEFAULT_FEED_POOL_SIZE, timeoutMs: DEFAULT_PG_OPTIONS.timeoutMs };
  const maintenance = new PgDb(settings.url, { max: 1, timeoutMs: MAINTENANCE_TIMEOUT_MS, probeMs: 0, name: 'tenant-registry-maintenance' });
  const main = new PgDb(settings.url, { max, timeoutMs, name: 'tenant-registry' });
  const feed = new PgDb(settings.url, { max: feedMax, timeoutMs, name: 'tenant-registry-feed' });
  const all = [main, feed, maintenance];
  await migrateOrClose(maintenance, all);
  return { main, feed, maintenance, close: async () => void (await Promise.all(all.map((db) => db.close()))) };
}

/** One database for the registry's stores (tests): the main one of openDatabases, the others closed. */
export async function createDb(settings: DatabaseSettings): Promise<Db> {
  const dbs = await openDatabases(settings);
  if (dbs.feed !== dbs.main) await Promise.all([dbs.feed.close(), dbs.maintenance.close()]);
  return dbs.main;
}

async function migrateOrClose(db: Db, all: Db[]): Promise<void> {
  try {
    await migrate(db);
  } catch (err) {
    await Promise.all(all.map((d) => d.close().catch(() => {})));
    throw err;
  }
}
