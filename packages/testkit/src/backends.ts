import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';

/**
 * The real servers integration and whole-stack tests run against. .ci/run
 * points these at the machine's PostgreSQL and Redis; the defaults are the same.
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key and channel prefix of its own, so parallel tests share one Redis safely. */
export function uniqueRedisPrefix(label = 't'): string {
  return `test:${label}:${randomBytes(6).toString('hex')}:`;
}

/** Deletes every key under `prefix`, so a test leaves nothing behind in the shared Redis. */
export async function deleteRedisPrefix(prefix: string, url = TEST_REDIS_URL): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

export interface TestDatabase {
  url: string;
  name: string;
  /**
   * A registry's environment on this database for suites that check what the
   * API answers, not how fast: the registry's budget per database operation
   * (DB_TIMEOUT_MS, 600 ms in production) at 5 s. Every test file creates its
   * own database, and each CREATE DATABASE forces a checkpoint; in one loaded
   * whole-suite run every create left in admin-tenant-meta's file was `503`
   * at once (14 tests in 1.2 s; a `change_not_propagated` would have waited
   * out a lease first): the registry had taken the server for hung after an
   * operation over the budget; in another, the whole-stack client-sdk test's
   * disable was `503 unavailable` the same way (PostgreSQL's log showed a
   * forced checkpoint syncing for 0.57 s then). Used by the registry API
   * contracts and the whole-stack tests (tests/support/stack.ts). The
   * budget has its own tests (pg-db.int.test.ts, tests/faults, whose stack
   * keeps the production 600 ms).
   */
  registryEnv: Record<string, string>;
  drop(): Promise<void>;
}

/** Creates a fresh database on the test server; drop() removes it. */
export async function createTestDatabase(label = 'relay'): Promise<TestDatabase> {
  const name = `${label}_${randomBytes(6).toString('hex')}`.toLowerCase();
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    registryEnv: { DATABASE_URL: url.toString(), DB_TIMEOUT_MS: '5000' },
    async drop() {
      const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
