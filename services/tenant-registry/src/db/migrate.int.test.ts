import { createTestDatabase, type TestDatabase } from '@service-relay/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { migrate } from './migrate';
import { PgDb } from './pg-db';

describe('migrate on PostgreSQL', () => {
  let database: TestDatabase | undefined;
  const dbs: PgDb[] = [];
  afterEach(async () => {
    await Promise.all(dbs.splice(0).map((db) => db.close()));
    await database?.drop();
  });

  it('registries starting together on a fresh database take turns: every migration applied once, none fails', async () => {
    database = await createTestDatabase('migrate');
    for (let i = 0; i < 4; i++) dbs.push(new PgDb(database.url, { max: 2, timeoutMs: 30_000, probeMs: 0 }));
    const results = await Promise.all(dbs.map((db) => migrate(db)));
    const applied = results.flat().sort();
    expect(applied.length).toBeGreaterThan(0);
    expect(new Set(applied).size, 'no migration applied twice').toBe(applied.length);
    expect(await migrate(dbs[0]!)).toEqual([]);
  });
});
