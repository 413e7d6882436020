import { fakeIdentity, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';

/** Two gateway replicas on one Redis: shared host-fetch limits (revocation across replicas: tests/ and tests/faults/). */
describe('edge-gateway on Redis', () => {
  const prefix = uniqueRedisPrefix('gw');
  const env = { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, HOST_FETCH_RATE_LIMIT: '3' };
  let a: GatewayHarness;
  let b: GatewayHarness;
  beforeAll(async () => {
    // Buses come from config (REDIS_URL), as in production; only the verifier and stubs are shared.
    a = await startGatewayHarness({ env });
    b = await startGatewayHarness({ env, verifier: a.verifier, registry: a.registry, realtime: a.realtime });
  });
  afterAll(async () => {
    await b.stop();
    await a.stop();
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
});
