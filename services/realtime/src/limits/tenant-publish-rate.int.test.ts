import { createLogger, createRedis, redisReady, systemClock, type Redis } from '@service-relay/core';
import { deleteRedisPrefix, freeLoopbackPort, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { RedisTenantPublishRate } from './tenant-publish-rate';

const logger = createLogger({ service: 't', level: 'silent' });
const prefix = uniqueRedisPrefix('tenant-publishes');
const clients: Redis[] = [];
const rates: RedisTenantPublishRate[] = [];
const LIMIT = { ratePerS: 1, burst: 10 };

/** One instance's view, on its own connection; `syncs` counts its reconciliations. */
async function instance(url = TEST_REDIS_URL): Promise<{ rate: RedisTenantPublishRate; syncs: { ok: number; failed: number } }> {
  const redis = createRedis(url, { connectionName: 'test-tenant-publishes' });
  redis.on('error', () => {});
  clients.push(redis);
  if (url === TEST_REDIS_URL) await redisReady(redis);
  const syncs = { ok: 0, failed: 0 };
  const rate = new RedisTenantPublishRate({ redis, prefix, clock: systemClock, logger, syncMs: 10, onSync: (ok) => (ok ? syncs.ok++ : syncs.failed++) });
  rates.push(rate);
  return { rate, syncs };
}

/** Two reconciliations that started after now. */
async function reconciled(syncs: { ok: number }): Promise<void> {
  const from = syncs.ok;
  await vi.waitFor(() => expect(syncs.ok).toBeGreaterThanOrEqual(from + 2), { timeout: 2000, interval: 2 });
}

afterAll(async () => {
  await Promise.all(rates.map((r) => r.close()));
  for (const r of clients) r.disconnect();
  await deleteRedisPrefix(prefix);
});

describe('the cluster-wide tenant publish rate on Redis (RedisTenantPublishRate)', () => {
  it('two instances share one bucket: what one admitted is refused on the other after a reconciliation, never a Redis call per publish', async () => {
    const [a, b] = [await instance(), await instance()];
    const tenant = `t-${Date.now()}`;
    const started = Date.now();
    // A tenant's first publish on an instance waits for one reconciliation; the rest are decided locally.
    for (let i = 0; i < 6; i++) expect(await a.rate.take(tenant, LIMIT)).toEqual({ ok: true });
    await reconciled(a.syncs);
    for (let i = 0; i < 4; i++) expect(await b.rate.take(tenant, LIMIT)).toEqual({ ok: true });
    expect(await b.rate.take(tenant, LIMIT)).toMatchObject({ ok: false });
    await reconciled(b.syncs);
    await reconciled(a.syncs);
    const refused = await a.rate.take(tenant, LIMIT);
    expect(refused).toMatchObject({ ok: false, retryAfterMs: expect.any(Number) });
    // Within one token's refill (1 a second), so the count is exact.
    expect(Date.now() - started).toBeLessThan(1000);
    // A host publish to n channels takes n at once, or none.
    expect(await a.rate.take(`${tenant}-n`, LIMIT, 11)).toMatchObject({ ok: false });
    expect(await a.rate.take(`${tenant}-n`, LIMIT, 10)).toEqual({ ok: true });
  });

  it('Redis unreachable: the first publish waits at most its deadline, then the instance decides alone (fail open per instance)', async () => {
    const down = await instance(`redis://127.0.0.1:${await freeLoopbackPort()}`);
    const tenant = `t-down-${Date.now()}`;
    const started = Date.now();
    for (let i = 0; i < 10; i++) expect(await down.rate.take(tenant, LIMIT)).toEqual({ ok: true });
    expect(await down.rate.take(tenant, LIMIT)).toMatchObject({ ok: false });
    expect(Date.now() - started).toBeLessThan(2000);
    await vi.waitFor(() => expect(down.syncs.failed).toBeGreaterThan(0));
  });
});
