import { createLogger, createRedis, redisReady } from '@service-relay/core';
import { RedisTenantEventBus, type TenantEvent, type TenantFeed } from '@service-relay/tenant-events';
import { createTestDatabase, deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix, type TestDatabase } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from './testing/test-registry';

const silent = createLogger({ service: 'test', level: 'silent' });

let database: TestDatabase;
let reg: TestRegistry;
let consumer: TenantFeed;
const received: TenantEvent[] = [];

beforeAll(async () => {
  database = await createTestDatabase('registry_srv');
  const prefix = uniqueRedisPrefix('registry');
  reg = await startTestRegistry({
    env: { DATABASE_URL: database.url, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix },
    bus: new RedisTenantEventBus(TEST_REDIS_URL, prefix, silent),
  });
  // Another consumer: it reports a change applied only after its handler ran.
  consumer = await reg.consumer();
  consumer.subscribe(async (e) => {
    await new Promise((r) => setImmediate(r));
    received.push(e);
  });
});
afterAll(async () => {
  consumer?.close();
  await reg?.stop();
  await database?.drop();
});

describe('tenant-registry on PostgreSQL and Redis', () => {
  it('reports the database and the tenant event bus in /readyz', async () => {
    const res = await fetch(`${reg.opsUrl}/readyz`);
    expect(await res.json()).toEqual({ status: 'ready', checks: { tenant_feed: true, feed_mirror: true, tenant_events: true, secrets_keyring: true } });
  });

  it('answers an admin call only after another consumer applied the change, in feed order', async () => {
    const created = (await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string };
    expect(received.filter((e) => e.tenant_id === created.tenant_id).map((e) => e.kind)).toEqual(['created']);
    await reg.admin('POST', `/admin/tenants/${created.tenant_id}/jwt_secret/rotate`);
    await reg.admin('POST', `/admin/tenants/${created.tenant_id}/jwt_secret/revoke_all`);
    expect(received.filter((e) => e.tenant_id === created.tenant_id).map(({ kind, version, revoked_key_versions }) => ({ kind, version, revoked_key_versions }))).toEqual([
      { kind: 'created', version: 1, revoked_key_versions: [] },
      { kind: 'rotated', version: 2, revoked_key_versions: [] },
      { kind: 'revoked_all', version: 3, revoked_key_versions: [2, 1] },
    ]);
  });

  it('holds the feed in its Redis mirror before it serves: a PostgreSQL outage right after a start finds it there', async () => {
    const prefix = uniqueRedisPrefix('registry-mirror');
    const db = await createTestDatabase('registry_mirror');
    const fresh = await startTestRegistry({
      env: { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix },
      bus: new RedisTenantEventBus(TEST_REDIS_URL, prefix, silent),
    });
    const redis = createRedis({ url: TEST_REDIS_URL });
    try {
      await redisReady(redis);
      // Read at once: the heartbeat's first repair is a second away.
      const [base, latest] = await redis.hmget(`${prefix}{feed-mirror}:meta`, 'base', 'latest');
      // Started at the outbox's latest sequence (a new database: none yet).
      expect({ base, latest }).toEqual({ base: '0', latest: '0' });
      expect(((await (await fetch(`${fresh.opsUrl}/readyz`)).json()) as { checks: Record<string, boolean> }).checks.feed_mirror).toBe(true);
    } finally {
      redis.disconnect();
      await fresh.stop();
      await db.drop();
      await deleteRedisPrefix(prefix);
    }
  });

  it('keeps tenants across a restart on PostgreSQL', async () => {
    const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string; host_sync_client_id: string; host_sync_client_secret: string };
    const auth = `Basic ${Buffer.from(`${t.host_sync_client_id}:${t.host_sync_client_secret}`).toString('base64')}`;
    const url = () => `${reg.baseUrl}/api/host/tenants/${t.tenant_id}/jwt_secret/fetch`;
    const before = await (await fetch(url(), { method: 'POST', headers: { authorization: auth } })).text();
    await reg.restart();
    const res = await fetch(url(), { method: 'POST', headers: { authorization: auth } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(before);
  });
});
