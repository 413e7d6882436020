import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createRedis, type Redis } from '@service-relay/core';
import { TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TenantKeysData } from '../token/tenant-keys';
import { KeyCipher } from './key-cipher';
import { RedisKeyCache } from './redis-key-cache';

const logger = createLogger({ service: 'test', level: 'silent' });
const data = (version: number): TenantKeysData => ({ found: true, disabled: false, version, primary: { secret: `secret-v${version}-${randomBytes(16).toString('hex')}`, keyVersion: version } });

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

  it('round-trips an entry that is encrypted at rest, with its remaining TTL', async () => {
    const t = randomUUID();
    const d = data(3);
    await cache.put(t, d, 30_000);
    const got = await cache.get(t);
    expect(got?.data).toEqual(d);
    expect(got!.ttlMs).toBeGreaterThan(25_000);
    const stored = JSON.stringify(await raw.hgetall(`${prefix}{verifier}:keys:${t}`));
    expect(stored).not.toContain(d.primary!.secret);
    expect(stored).toContain('v1.');
  });

  it('refuses writes below the floor or below the live entry', async () => {
    const t = randomUUID();
    await cache.put(t, data(5), 30_000);
    await cache.put(t, data(4), 30_000);
    expect((await cache.get(t))?.data.version).toBe(5);
    await cache.drop(t, 7);
    expect(await cache.get(t)).toBeUndefined();
    await cache.put(t, data(6), 30_000);
    expect(await cache.get(t)).toBeUndefined();
    await cache.put(t, data(7), 30_000);
    expect((await cache.get(t))?.data.version).toBe(7);
  });

  it('dropAll orphans every entry at once', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    await cache.put(a, data(1), 30_000);
    await cache.put(b, data(1), 30_000);
    await cache.dropAll();
    expect(await cache.get(a)).toBeUndefined();
    expect(await cache.get(b)).toBeUndefined();
    await cache.put(a, data(1), 30_000);
    expect((await cache.get(a))?.data.version).toBe(1);
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
});
