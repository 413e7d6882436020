import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ConfigError } from '@service-relay/core';
// What node-postgres parses DATABASE_URL with (pg's own dependency): the test reads the URL as pg will.
import { parse as parsePgUrl } from 'pg-connection-string';
import { afterAll, describe, expect, it } from 'vitest';
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
    expect(c).toMatchObject({ httpPort: 8082, grpcPort: 50052, opsPort: 9082, opsHost: '127.0.0.1', dataDir: resolve('.data'), database: { kind: 'pglite', dir: resolve('.data/pg') }, logLevel: 'info' });
    expect(c.redis).toEqual({ url: undefined, prefix: 'relay:' });
    expect(c.secretsKeys).toEqual([{ id: 'k0', key: Buffer.from(BASE.SECRETS_KEY, 'base64') }]);
    expect(c).toMatchObject({ secretsKeysVariable: 'SECRETS_KEY', reencryptBatch: 100 });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('reads the ops listener, which must not be the admin port', () => {
    expect(loadConfig({ ...BASE, REGISTRY_OPS_PORT: '0', REGISTRY_OPS_HOST: '::' })).toMatchObject({ opsPort: 0, opsHost: '::' });
    expect(failure({ ...BASE, REGISTRY_OPS_PORT: '8082' })).toBe('REGISTRY_OPS_PORT');
  });

  it('uses PostgreSQL when DATABASE_URL is set, and DATA_DIR for PGlite otherwise', () => {
    expect(loadConfig({ ...BASE, DATABASE_URL: 'postgres://u@h:5432/db' }).database).toEqual({ kind: 'postgres', url: 'postgres://u@h:5432/db', pool: { max: 10, feedMax: 3, timeoutMs: 600 } });
    expect(loadConfig({ ...BASE, DATABASE_URL: 'postgres://u@h:5432/db', DB_POOL_SIZE: '20', DB_FEED_POOL_SIZE: '4', DB_TIMEOUT_MS: '900' }).database).toMatchObject({ pool: { max: 20, feedMax: 4, timeoutMs: 900 } });
    expect(loadConfig({ ...BASE, DATA_DIR: '/var/lib/relay' }).database).toEqual({ kind: 'pglite', dir: '/var/lib/relay/pg' });
  });

  describe('TLS to PostgreSQL (sslmode, sslrootcert, sslcert, sslkey; or PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-pg-tls-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const ca = join(dir, 'ca.pem');
    const cert = join(dir, 'client.pem');
    const key = join(dir, 'client.key');
    const caPem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    writeFileSync(ca, caPem);
    writeFileSync(cert, caPem);
    writeFileSync(key, '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n');
    const url = (env: Record<string, string>) => (loadConfig({ ...BASE, ...env }).database as { url: string }).url;
    const message = (env: Record<string, string>) => {
      try {
        loadConfig({ ...BASE, ...env });
      } catch (err) {
        return (err as Error).message;
      }
      throw new Error('expected a ConfigError');
    };

    it('passes a verifying URL to node-postgres as it is, and pg reads the CA and the client certificate from it', () => {
      const u = `postgres://relay:p%40ss@db.internal:5432/relay?sslmode=verify-full&sslrootcert=${ca}&sslcert=${cert}&sslkey=${key}`;
      expect(url({ DATABASE_URL: u })).toBe(u);
      const parsed = parsePgUrl(u) as { password?: string; ssl: { ca: string; cert: string; key: string; rejectUnauthorized?: boolean } };
      expect(parsed.password).toBe('p@ss');
      expect(parsed.ssl).toMatchObject({ ca: caPem, cert: caPem });
      expect(parsed.ssl.rejectUnauthorized).not.toBe(false);
    });

    it("takes libpq's variables for what the URL leaves out", () => {
      const u = url({ DATABASE_URL: 'postgres://relay:pw@db:5432/relay', PGSSLMODE: 'verify-full', PGSSLROOTCERT: ca });
      expect(new URL(u).searchParams.get('sslmode')).toBe('verify-full');
      expect(new URL(u).searchParams.get('sslrootcert')).toBe(ca);
      expect((parsePgUrl(u) as { ssl: { ca: string } }).ssl.ca).toBe(caPem);
      // The URL wins where it names one.
      expect(new URL(url({ DATABASE_URL: 'postgres://relay:pw@db/relay?sslmode=require', PGSSLMODE: 'disable' })).searchParams.get('sslmode')).toBe('require');
      expect(url({ DATABASE_URL: 'postgres://relay:pw@db/relay' })).toBe('postgres://relay:pw@db/relay');
    });

    it.each([
      [{ DATABASE_URL: 'postgres://u:pw@h/db?sslmode=no-verify' }, 'DATABASE_URL sslmode must be one of disable, require, verify-ca, verify-full'],
      [{ DATABASE_URL: 'postgres://u:pw@h/db?sslmode=prefer' }, 'DATABASE_URL sslmode must be one of'],
      [{ DATABASE_URL: 'postgres://u:pw@h/db', PGSSLMODE: 'allow' }, 'PGSSLMODE sslmode must be one of'],
      [{ DATABASE_URL: 'postgres://u:pw@h/db?sslmode=require&uselibpqcompat=true' }, 'DATABASE_URL uselibpqcompat is not supported'],
      [{ DATABASE_URL: 'postgres://u:pw@h/db?sslrootcert=/nonexistent/ca.pem' }, 'DATABASE_URL sslrootcert names a file that cannot be read (ENOENT): /nonexistent/ca.pem'],
      [{ DATABASE_URL: 'postgres://u:pw@h/db', PGSSLROOTCERT: key }, 'PGSSLROOTCERT names a file that holds no PEM certificate'],
      [{ DATABASE_URL: `postgres://u:pw@h/db?sslkey=${ca}&sslcert=${cert}` }, 'DATABASE_URL sslkey names a file that holds no PEM private key'],
      [{ DATABASE_URL: `postgres://u:pw@h/db?sslcert=${cert}` }, 'DATABASE_URL sslcert and sslkey (or PGSSLCERT and PGSSLKEY) go together'],
      [{ DATABASE_URL: `postgres://u:pw@h/db?sslmode=disable&sslrootcert=${ca}` }, 'DATABASE_URL sslmode is disable, but TLS files are named'],
    ])('refuses %j at start without echoing the URL', (env, want) => {
      const got = message(env as Record<string, string>);
      expect(got).toContain(`configuration error: ${want}`);
      expect(got).not.toContain('u:pw');
    });
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
