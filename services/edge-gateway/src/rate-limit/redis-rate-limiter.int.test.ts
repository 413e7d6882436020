import { RedisTenantEventBus } from '@service-relay/tenant-events';
import { createLogger } from '@service-relay/core';
import { fakeIdentity, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';

/** Two gateway replicas on one Redis: shared host-fetch limits, and revocation through the Redis bus. */
describe('edge-gateway on Redis', () => {
  const prefix = uniqueRedisPrefix('gw');
  const env = { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, HOST_FETCH_RATE_LIMIT: '3' };
  let a: GatewayHarness;
  let b: GatewayHarness;
  const admin = new RedisTenantEventBus(TEST_REDIS_URL, prefix, createLogger({ service: 'test', level: 'silent' }));
  beforeAll(async () => {
    // Buses come from config (REDIS_URL), as in production; only the verifier and stubs are shared.
    a = await startGatewayHarness({ env });
    b = await startGatewayHarness({ env, verifier: a.verifier, registry: a.registry, realtime: a.realtime });
  });
  afterAll(async () => {
    await b.stop();
    await a.stop();
    await admin.close();
  });

  const fetchSecret = (h: GatewayHarness, tenant: string) => fetch(`${h.url}/api/host/tenants/${tenant}/jwt_secret/fetch`, { method: 'POST' });

  it('shares the host-fetch limit across replicas', async () => {
    const tenant = fakeIdentity().tenantId;
    const statuses = [];
    for (const h of [a, b, a, b]) statuses.push((await fetchSecret(h, tenant)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const res = await fetchSecret(a, tenant);
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another tenant from the same address has its own budget.
    expect((await fetchSecret(b, fakeIdentity().tenantId)).status).toBe(200);
  });

  it('refuses a revoked token on every replica once the admin publish returns', async () => {
    const id = fakeIdentity();
    a.verifier.allow('tok-int', id);
    for (const h of [a, b]) expect((await fetch(`${h.url}/api/v1/me`, { headers: { authorization: 'Bearer tok-int' } })).status).toBe(200);
    a.verifier.deny('tok-int');
    const result = await admin.publish({ tenant_id: id.tenantId, kind: 'disabled', version: 2, revoked_key_versions: [] });
    expect(result.acknowledged).toBe(result.delivered);
    for (const h of [a, b]) expect((await fetch(`${h.url}/api/v1/me`, { headers: { authorization: 'Bearer tok-int' } })).status).toBe(401);
  });
});
