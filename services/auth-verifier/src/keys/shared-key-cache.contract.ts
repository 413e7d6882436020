import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TenantKeysData } from '../token/tenant-keys';
import type { SharedKeyCache } from './shared-key-cache';

export interface SharedKeyCacheFixture {
  /** Two replicas' started handles on one fresh shared store (the memory driver: the same object twice). */
  make(): Promise<{ a: SharedKeyCache; b: SharedKeyCache }>;
  /** Lets `ms` pass on the cache's clock (the memory driver's ManualClock; real time for Redis). */
  elapse(ms: number): Promise<void>;
}

const data = (version: number): TenantKeysData => ({ found: true, disabled: false, version, primary: { secret: `secret-v${version}-${randomBytes(16).toString('hex')}`, keyVersion: version } });

/** The behaviour every SharedKeyCache driver has. */
export function sharedKeyCacheContract(name: string, fixture: SharedKeyCacheFixture): void {
  describe(`SharedKeyCache contract: ${name}`, () => {
    it('round-trips an entry with its remaining TTL', async () => {
      const { a: cache } = await fixture.make();
      const t = randomUUID();
      const d = data(3);
      await cache.put(t, d, 30_000);
      const got = await cache.get(t);
      expect(got?.data).toEqual(d);
      expect(got!.ttlMs).toBeGreaterThan(25_000);
      expect(got!.ttlMs).toBeLessThanOrEqual(30_000);
      expect(await cache.ready()).toBe(true);
    });

    it('refuses writes below the floor or below the live entry', async () => {
      const { a: cache } = await fixture.make();
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
      const { a: cache } = await fixture.make();
      const [a, b] = [randomUUID(), randomUUID()];
      await cache.put(a, data(1), 30_000);
      await cache.put(b, data(1), 30_000);
      await cache.dropAll();
      expect(await cache.get(a)).toBeUndefined();
      expect(await cache.get(b)).toBeUndefined();
      await cache.put(a, data(1), 30_000);
      expect((await cache.get(a))?.data.version).toBe(1);
    });

    it('serves nothing past the TTL; an older version may then be written again', async () => {
      const { a: cache } = await fixture.make();
      const t = randomUUID();
      await cache.put(t, data(2), 40);
      await fixture.elapse(80);
      expect(await cache.get(t)).toBeUndefined();
      await cache.put(t, data(1), 30_000);
      expect((await cache.get(t))?.data.version).toBe(1);
    });

    it('one replica\u2019s entries, drops and floors are every replica\u2019s', async () => {
      const { a, b } = await fixture.make();
      const t = randomUUID();
      await a.put(t, data(2), 30_000);
      expect((await b.get(t))?.data.version).toBe(2);
      await b.drop(t, 3);
      expect(await a.get(t)).toBeUndefined();
      await a.put(t, data(2), 30_000);
      expect(await b.get(t)).toBeUndefined();
    });
  });
}
