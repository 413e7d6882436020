import type { DatabaseSettings } from '../config';
import type { Db } from './db';
import { migrate } from './migrate';
import { PgDb } from './pg-db';
import { PGliteDb } from './pglite-db';

/** Opens the configured database and brings its schema up to date. */
export async function createDb(settings: DatabaseSettings): Promise<Db> {
  const db = settings.kind === 'postgres' ? new PgDb(settings.url) : await PGliteDb.open(settings.dir);
  try {
    await migrate(db);
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
  return db;
}
