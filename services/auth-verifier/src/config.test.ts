import { describe, expect, it } from 'vitest';
import { deriveCacheKey, loadConfig } from './config';

const base = { INTERNAL_TOKEN: 'int-9f2KqW7xLm3RbT8vNc5YhJ0dPe4sGa6u' };
const SECRETS_KEY = Buffer.from(Array.from({ length: 32 }, (_v, i) => i * 7)).toString('base64');

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const c = loadConfig(base, { standalone: false });
    expect(c).toMatchObject({ grpcPort: 50051, httpPort: 8083, registryAddr: '127.0.0.1:50052', maxTokenLifetimeS: 86400, keyCacheTtlS: 60, cacheKeys: undefined });
    expect(c.redis).toEqual({ url: undefined, prefix: 'relay:' });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('derives a cache key from SECRETS_KEY that is not SECRETS_KEY itself', () => {
    const c = loadConfig({ ...base, REDIS_URL: 'redis://127.0.0.1:6379', SECRETS_KEY }, { standalone: true });
    expect(c.cacheKeys?.ids).toEqual(['k0']);
    expect(c.cacheKeys?.key('k0')).toEqual(deriveCacheKey(Buffer.from(SECRETS_KEY, 'base64')));
    expect(c.cacheKeys?.key('k0')?.equals(Buffer.from(SECRETS_KEY, 'base64'))).toBe(false);
  });

  it('derives one cache key per key of SECRETS_KEYS, sealing with the newest', () => {
    const k1 = Buffer.from(Array.from({ length: 32 }, (_v, i) => i * 11 + 1));
    const c = loadConfig({ ...base, REDIS_URL: 'redis://127.0.0.1:6379', SECRETS_KEY, SECRETS_KEYS: `k1:${k1.toString('base64')}` }, { standalone: true });
    expect(c.cacheKeys?.ids).toEqual(['k1', 'k0']);
    expect(c.cacheKeys?.sealingKeyId).toBe('k1');
    expect(c.cacheKeys?.key('k1')).toEqual(deriveCacheKey(k1));
  });

  it.each([
    [{ ...base, INTERNAL_TOKEN: 'short' }, 'INTERNAL_TOKEN'],
    [{}, 'INTERNAL_TOKEN'],
    [{ ...base, VERIFIER_GRPC_PORT: 'x' }, 'VERIFIER_GRPC_PORT'],
    [{ ...base, MAX_TOKEN_LIFETIME_S: '0' }, 'MAX_TOKEN_LIFETIME_S'],
    [{ ...base, KEY_CACHE_TTL_S: '1.5' }, 'KEY_CACHE_TTL_S'],
    [{ ...base, REGISTRY_GRPC_ADDR: 'nope' }, 'REGISTRY_GRPC_ADDR'],
    [{ ...base, REDIS_URL: 'redis://127.0.0.1:6379' }, 'SECRETS_KEY'],
    [{ ...base, REDIS_URL: 'redis://127.0.0.1:6379', SECRETS_KEY: 'abc' }, 'SECRETS_KEY'],
    [{ ...base, REDIS_URL: 'redis://127.0.0.1:6379', SECRETS_KEYS: 'k1' }, 'SECRETS_KEYS'],
    [{ ...base, LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
  ])('refuses a bad value: %o names %s', (env, variable) => {
    expect(() => loadConfig(env, { standalone: false })).toThrow(expect.objectContaining({ variable }));
  });

  it('requires REDIS_URL when run alone', () => {
    expect(() => loadConfig(base, { standalone: true })).toThrow(expect.objectContaining({ variable: 'REDIS_URL' }));
  });
});
