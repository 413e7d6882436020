import { Redis } from 'ioredis';
import pg from 'pg';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './backends';

/**
 * vitest globalSetup for the int and e2e suites: they need the real PostgreSQL
 * and Redis, and fail (never skip) when either cannot be reached.
 */
export default async function requireBackends(): Promise<void> {
  const problems: string[] = [];
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    problems.push(`PostgreSQL at ${TEST_DATABASE_URL}: ${(err as Error).message}`);
  } finally {
    await client.end().catch(() => {});
  }
  const redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    problems.push(`Redis at ${TEST_REDIS_URL}: ${(err as Error).message}`);
  } finally {
    redis.disconnect();
  }
  if (problems.length > 0) {
    throw new Error(`integration backends unreachable (start them, see README):\n  ${problems.join('\n  ')}`);
  }
}
