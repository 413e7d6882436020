import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

interface Created {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

const UNKNOWN_ID = '0b7a3c52-6f1e-4d2a-9c8b-7e6f5a4d3c2b';
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

/** Status, body and every header that is not per-connection, exactly. */
async function snapshot(res: Response) {
  const headers = [...res.headers.entries()].filter(([k]) => !['date', 'connection', 'keep-alive', 'x-request-id'].includes(k));
  return { status: res.status, headers, body: await res.text() };
}

describe('host-sync fetch on the registry port: failures are rate limited, the right credential never is', () => {
  let reg: TestRegistry;
  let tenant: Created;
  const clock = new ManualClock(Date.now());
  beforeAll(async () => {
    reg = await startTestRegistry({ env: { HOST_FETCH_RATE_LIMIT: '3' }, clock });
    tenant = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
  });
  afterAll(() => reg?.stop());

  const fetchSecret = (tenantId: string, authorization: string | undefined, headers: Record<string, string> = {}) =>
    fetch(`${reg.baseUrl}/api/host/tenants/${tenantId}/jwt_secret/fetch`, { method: 'POST', headers: { ...(authorization && { authorization }), ...headers } });
  const good = () => basic(tenant.host_sync_client_id, tenant.host_sync_client_secret);
  const wrong = () => basic(tenant.host_sync_client_id, 'not-the-secret');

  it('answers failures 401 up to the limit, then 429 alike for known and unknown tenants, and still serves the right credential', async () => {
    clock.advance(60_000);
    const known: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 4; i++) {
      known.push((await fetchSecret(tenant.tenant_id, wrong())).status);
      unknown.push((await fetchSecret(UNKNOWN_ID, wrong())).status);
    }
    expect(known).toEqual([401, 401, 401, 429]);
    expect(unknown).toEqual([401, 401, 401, 429]);
    // Over the limit, the answer to a wrong credential reveals nothing about the tenant.
    const [a, b] = [await snapshot(await fetchSecret(tenant.tenant_id, wrong())), await snapshot(await fetchSecret(UNKNOWN_ID, undefined))];
    expect(a).toEqual(b);
    expect(a.status).toBe(429);
    expect(a.body).toBe('{"errors":["rate_limited"]}');
    expect(Object.fromEntries(a.headers)['retry-after']).toBe('60');
    // The host holding the credential is not locked out by anyone's failures.
    for (let i = 0; i < 3; i++) expect((await fetchSecret(tenant.tenant_id, good())).status).toBe(200);
    clock.advance(60_000);
    expect((await fetchSecret(tenant.tenant_id, wrong())).status).toBe(401);
  });

  it("counts the gateway's failures per real client address, vouched for by the internal token", async () => {
    clock.advance(60_000);
    const viaGateway = (address: string, token = reg.internalToken) => fetchSecret(tenant.tenant_id, wrong(), { 'x-internal-token': token, 'x-relay-client-address': address });
    const a: number[] = [];
    for (let i = 0; i < 4; i++) a.push((await viaGateway('203.0.113.7')).status);
    expect(a).toEqual([401, 401, 401, 429]);
    // Another client behind the same gateway has its own budget.
    expect((await viaGateway('198.51.100.9')).status).toBe(401);
    // Without the internal token the claimed address is ignored: counted against the socket's address.
    const forged: number[] = [];
    for (let i = 0; i < 4; i++) forged.push((await viaGateway(`192.0.2.${i}`, 'not-the-internal-token')).status);
    expect(forged).toEqual([401, 401, 401, 429]);
  });

  it('answers a tenant id that does not percent-decode with the same 401 as any unknown tenant', async () => {
    clock.advance(60_000);
    const reference = await snapshot(await fetchSecret(UNKNOWN_ID, good()));
    expect(reference.status).toBe(401);
    clock.advance(60_000);
    for (const id of ['%ZZ', '%', '%E0%A4%A']) {
      expect(await snapshot(await fetchSecret(id, good()))).toEqual(reference);
    }
  });
});
