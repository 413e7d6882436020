import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createRedis, Keyring, type Redis } from '@service-relay/core';
import { deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TenantKeysData } from '../token/tenant-keys';
import { KeyCipher } from './key-cipher';
import { RedisKeyCache } from './redis-key-cache';
import { sharedKeyCacheContract } from './shared-key-cache.contract';

const logger = createLogger({ service: 'test', level: 'silent' });
const data = (version: number): TenantKeysData => ({ found: true, disabled: false, version, primary: { secret: `secret-v${version}-${randomBytes(16).toString('hex')}`, keyVersion: version } });

const contractPrefixes: string[] = [];
const contractCaches: RedisKeyCache[] = [];

sharedKeyCacheContract('redis (two replicas)', {
  async make() {
    const prefix = uniqueRedisPrefix('verifier');
    contractPrefixes.push(prefix);
    const cipher = new KeyCipher(randomBytes(32));
    const replica = () => {
      const c = new RedisKeyCache({ url: TEST_REDIS_URL, prefix, cipher, floorTtlMs: 60_000, logger });
      contractCaches.push(c);
      return c;
    };
    const [a, b] = [replica(), replica()];
    await Promise.all([a.start(), b.start()]);
    return { a, b };
  },
  elapse: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
});

afterAll(async () => {
  await Promise.all(contractCaches.map((c) => c.close()));
  await Promise.all(contractPrefixes.map((p) => deleteRedisPrefix(p)));
});

describe('RedisKeyCache on a real Redis', () => {
  const prefix = uniqueRedisPrefix('verifier');
  const key = randomBytes(32);
  const cache = new RedisKeyCache({ url: TEST_REDIS_URL, prefix, cipher: new KeyCipher(key), floorTtlMs: 60_000, logger });
  let raw: Redis;

  beforeAll(async () => {
    raw = createRedis(TEST_REDIS_URL, { enableOfflineQueue: true });
    await cache.start();
  });
  afterAll(async () => {
    const keys = await raw.keys(`${prefix}*`);
    if (keys.length) await raw.del(...keys);
    raw.disconnect();
    await cache.close();
  });

  it('keeps an entry encrypted at rest', async () => {
    const t = randomUUID();
    const d = data(3);
    await cache.put(t, d, 30_000);
    expect((await cache.get(t))?.data).toEqual(d);
    const stored = JSON.stringify(await raw.hgetall(`${prefix}{verifier}:keys:${t}`));
    expect(stored).not.toContain(d.primary!.secret);
    expect(stored).toContain('v1.');
  });

  it('ignores entries it cannot open: another key, or a version edited in Redis', async () => {
    const t = randomUUID();
    const other = new RedisKeyCache({ url: TEST_REDIS_URL, prefix, cipher: new KeyCipher(randomBytes(32)), floorTtlMs: 60_000, logger });
    await other.start();
    await other.put(t, data(2), 30_000);
    expect(await cache.get(t)).toBeUndefined();
    await other.close();
    await cache.put(t, data(3), 30_000);
    await raw.hset(`${prefix}{verifier}:keys:${t}`, 'v', '9');
    expect(await cache.get(t)).toBeUndefined();
  });

  it('during a SECRETS_KEYS rotation: an entry under the newer key is a quiet miss for a verifier without it, and opens on one with both', async () => {
    const lines: string[] = [];
    const seen = createLogger({ service: 'test', level: 'debug', destination: { write: (l: string) => void lines.push(l) } });
    const k1 = randomBytes(32);
    const rolled = new RedisKeyCache({ url: TEST_REDIS_URL, prefix, cipher: new KeyCipher(new Keyring([{ id: 'k1', key: k1 }, { id: 'k0', key }])), floorTtlMs: 60_000, logger });
    const notYet = new RedisKeyCache({ url: TEST_REDIS_URL, prefix, cipher: new KeyCipher(key), floorTtlMs: 60_000, logger: seen });
    await Promise.all([rolled.start(), notYet.start()]);
    try {
      const t = randomUUID();
      const d = data(4);
      await cache.put(t, d, 30_000);
      expect((await rolled.get(t))?.data).toEqual(d);
      await rolled.put(t, data(5), 30_000);
      expect(await raw.hget(`${prefix}{verifier}:keys:${t}`, 'c')).toMatch(/^v2\.k1\./);
      expect(await notYet.get(t)).toBeUndefined();
      expect(lines.join('')).toContain('key cache entry sealed under a key this verifier does not have');
      expect(lines.join('')).not.toContain('failed to open');
    } finally {
      await Promise.all([rolled.close(), notYet.close()]);
    }
  });
});
