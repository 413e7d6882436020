import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, TEST_INTERNAL_TOKEN, type GatewayHarness } from '../testing/gateway-harness';

const KNOWN = '0f1e2d3c-4b5a-4697-8877-665544332211';
/** The stand-in answers this one as a registry over its failure limit does. */
const LIMITED = '22222222-3333-4444-8555-666666666666';
const REFUSAL = '{"errors":["invalid_host_sync_credentials"]}';
const basic = `Basic ${Buffer.from('hs_client:secret').toString('base64')}`;
const fetchPath = (tenant: string) => `/api/host/tenants/${tenant}/jwt_secret/fetch`;

describe('edge-gateway: host-sync fetch', () => {
  let h: GatewayHarness;
  const clock = new ManualClock();
  beforeAll(async () => {
    h = await startGatewayHarness({ clock });
    // A registry stand-in: one tenant whose credentials are right, the fixed 401 for everything else.
    h.registry.handler = (req, res) => {
      if (req.url === fetchPath(KNOWN) && req.headers.authorization === basic) {
        const body = JSON.stringify({ kid: KNOWN, algorithm: 'HS256', issuer: 'service-relay', audience: 'service-relay', jwt_secret_primary: 's'.repeat(43) });
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store, private', pragma: 'no-cache' });
        res.end(body);
        return;
      }
      if (req.url === fetchPath(LIMITED)) {
        res.writeHead(429, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '42' });
        res.end('{"errors":["rate_limited"]}');
        return;
      }
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Basic realm="service-relay"' });
      res.end(REFUSAL);
    };
  });
  afterAll(() => h.stop());

  const post = (tenant: string, headers: Record<string, string> = { authorization: basic }) => fetch(`${h.url}${fetchPath(tenant)}`, { method: 'POST', headers });

  it('passes the success through with its no-store headers, the Basic header unchanged, and vouches for the client address', async () => {
    const res = await post(KNOWN, { authorization: basic, 'x-relay-tenant-id': 'forged', 'x-relay-client-address': '192.0.2.1', 'x-internal-token': 'forged' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store, private');
    expect(res.headers.get('pragma')).toBe('no-cache');
    expect(await res.json()).toMatchObject({ kid: KNOWN, algorithm: 'HS256' });
    const seen = h.registry.requests.at(-1)!;
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe(fetchPath(KNOWN));
    expect(seen.headers.authorization).toBe(basic);
    expect(seen.headers['x-relay-tenant-id']).toBeUndefined();
    // The registry rate-limits failures per client address; only the gateway's own word counts.
    expect(seen.headers['x-internal-token']).toBe(TEST_INTERNAL_TOKEN);
    expect(seen.headers['x-relay-client-address']).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
  });

  it("passes the registry's 401 and 429 through byte for byte", async () => {
    for (const tenant of ['11111111-2222-4333-8444-555555555555', 'not-a-uuid']) {
      const res = await post(tenant, {});
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Basic realm="service-relay"');
      expect(await res.text()).toBe(REFUSAL);
    }
    const res = await post(LIMITED, {});
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('42');
    expect(await res.text()).toBe('{"errors":["rate_limited"]}');
  });

  it('answers a tenant id that does not percent-decode with the same 401 as any unknown tenant (never 500)', async () => {
    const reference = await post('11111111-2222-4333-8444-555555555555');
    const refHeaders = [...reference.headers.entries()].filter(([k]) => !['date', 'x-request-id', 'connection', 'keep-alive'].includes(k));
    const refBody = await reference.text();
    for (const id of ['%ZZ', '%', '%E0%A4%A']) {
      const res = await post(id);
      expect(res.status).toBe(401);
      expect([...res.headers.entries()].filter(([k]) => !['date', 'x-request-id', 'connection', 'keep-alive'].includes(k))).toEqual(refHeaders);
      expect(await res.text()).toBe(refBody);
      // Forwarded undecoded, for the registry to judge.
      expect(h.registry.requests.at(-1)!.url).toBe(fetchPath(id));
    }
  });
});
