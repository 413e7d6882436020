import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { ConfigError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';

const BASE = {
  ADMIN_TOKEN: 'adm-3hT9wQ2zK7pR5vX1cN8mB4yL6fJ0sDgE',
  INTERNAL_TOKEN: 'int-9f2KqW7xLm3RbT8vNc5YhJ0dPe4sGa6u',
  SECRETS_KEY: randomBytes(32).toString('base64'),
};

function failure(env: Record<string, string>, standalone = false): string {
  try {
    loadConfig(env, { standalone });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).variable;
  }
  throw new Error('expected a ConfigError');
}

describe('loadConfig', () => {
  it('applies the defaults: contract ports, PGlite under ./.data, no Redis', () => {
    const c = loadConfig(BASE);
    expect(c).toMatchObject({ httpPort: 8082, grpcPort: 50052, dataDir: resolve('.data'), database: { kind: 'pglite', dir: resolve('.data/pg') }, logLevel: 'info' });
    expect(c.redis).toEqual({ url: undefined, prefix: 'relay:' });
    expect(c.secretsKeys).toEqual([{ id: 'k0', key: Buffer.from(BASE.SECRETS_KEY, 'base64') }]);
    expect(c).toMatchObject({ secretsKeysVariable: 'SECRETS_KEY', reencryptBatch: 100 });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('uses PostgreSQL when DATABASE_URL is set, and DATA_DIR for PGlite otherwise', () => {
    expect(loadConfig({ ...BASE, DATABASE_URL: 'postgres://u@h:5432/db' }).database).toEqual({ kind: 'postgres', url: 'postgres://u@h:5432/db', pool: { max: 10, feedMax: 3, timeoutMs: 600 } });
    expect(loadConfig({ ...BASE, DATABASE_URL: 'postgres://u@h:5432/db', DB_POOL_SIZE: '20', DB_FEED_POOL_SIZE: '4', DB_TIMEOUT_MS: '900' }).database).toMatchObject({ pool: { max: 20, feedMax: 4, timeoutMs: 900 } });
    expect(loadConfig({ ...BASE, DATA_DIR: '/var/lib/relay' }).database).toEqual({ kind: 'pglite', dir: '/var/lib/relay/pg' });
  });

  it('refuses an admin token that could not be sent as a bearer token', () => {
    expect(failure({ ...BASE, ADMIN_TOKEN: 'adm-3hT9wQ2zK7pR5vX1cN8mB4y"L6fJ0sDgE' })).toBe('ADMIN_TOKEN');
    expect(failure({ ...BASE, ADMIN_TOKEN_NEXT: 'nxt-3hT9wQ2zK7pR5vX1cN8mB4y L6fJ0sDgE' })).toBe('ADMIN_TOKEN_NEXT');
    expect(loadConfig({ ...BASE, ADMIN_TOKEN: randomBytes(32).toString('base64') }).adminToken).toHaveLength(44);
  });

  it('names the bad variable', () => {
    expect(failure({ ...BASE, REGISTRY_HTTP_PORT: 'http' })).toBe('REGISTRY_HTTP_PORT');
    expect(failure({ ...BASE, REGISTRY_GRPC_PORT: '70000' })).toBe('REGISTRY_GRPC_PORT');
    expect(failure({ ...BASE, DATABASE_URL: 'mysql://x' })).toBe('DATABASE_URL');
    expect(failure({ ...BASE, ADMIN_TOKEN: 'short' })).toBe('ADMIN_TOKEN');
    expect(failure({ ...BASE, INTERNAL_TOKEN: '' })).toBe('INTERNAL_TOKEN');
    expect(failure({ ...BASE, SECRETS_KEY: 'bm90IDMyIGJ5dGVz' })).toBe('SECRETS_KEY');
    expect(failure({ ...BASE, LOG_LEVEL: 'loud' })).toBe('LOG_LEVEL');
    expect(failure({ ...BASE, REDIS_URL: 'http://x' })).toBe('REDIS_URL');
  });

  it('requires REDIS_URL when the registry runs alone', () => {
    expect(failure(BASE, true)).toBe('REDIS_URL');
    expect(loadConfig({ ...BASE, REDIS_URL: 'redis://127.0.0.1:6379' }, { standalone: true }).redis.url).toBe('redis://127.0.0.1:6379');
  });
});
