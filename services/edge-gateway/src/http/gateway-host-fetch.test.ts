import { ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';

const KNOWN = '0f1e2d3c-4b5a-4697-8877-665544332211';
const REFUSAL = '{"errors":["invalid_host_sync_credentials"]}';
const basic = `Basic ${Buffer.from('hs_client:secret').toString('base64')}`;
const fetchPath = (tenant: string) => `/api/host/tenants/${tenant}/jwt_secret/fetch`;

describe('edge-gateway: host-sync fetch', () => {
  let h: GatewayHarness;
  const clock = new ManualClock();
  beforeAll(async () => {
    h = await startGatewayHarness({ clock, env: { HOST_FETCH_RATE_LIMIT: '3' } });
    // A registry stand-in: one tenant whose credentials are right, the fixed 401 for everything else.
    h.registry.handler = (req, res) => {
      if (req.url === fetchPath(KNOWN) && req.headers.authorization === basic) {
        const body = JSON.stringify({ kid: KNOWN, algorithm: 'HS256', issuer: 'service-relay', audience: 'service-relay', jwt_secret_primary: 's'.repeat(43) });
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store, private', pragma: 'no-cache' });
        res.end(body);
        return;
      }
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Basic realm="service-relay"' });
      res.end(REFUSAL);
    };
  });
  afterAll(() => h.stop());

  const post = (tenant: string, headers: Record<string, string> = { authorization: basic }) => fetch(`${h.url}${fetchPath(tenant)}`, { method: 'POST', headers });

  it('passes the success through with its no-store headers, and the Basic header unchanged', async () => {
    const res = await post(KNOWN, { authorization: basic, 'x-relay-tenant-id': 'forged', 'x-internal-token': 'forged' });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store, private');
    expect(res.headers.get('pragma')).toBe('no-cache');
    expect(await res.json()).toMatchObject({ kid: KNOWN, algorithm: 'HS256' });
    const seen = h.registry.requests.at(-1)!;
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe(fetchPath(KNOWN));
    expect(seen.headers.authorization).toBe(basic);
    expect(seen.headers['x-relay-tenant-id']).toBeUndefined();
    expect(seen.headers['x-internal-token']).toBeUndefined();
  });

  it("passes the registry's 401 through byte for byte", async () => {
    for (const tenant of ['11111111-2222-4333-8444-555555555555', 'not-a-uuid']) {
      const res = await post(tenant, {});
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Basic realm="service-relay"');
      expect(await res.text()).toBe(REFUSAL);
    }
  });

  it('rate limits per client and tenant, the same for tenants that do not exist', async () => {
    clock.advance(60_000);
    const unknown = '99999999-8888-4777-8666-555555555555';
    const forwarded = h.registry.requests.length;
    const statuses = async (tenant: string) => {
      const out: number[] = [];
      for (let i = 0; i < 4; i++) out.push((await post(tenant)).status);
      return out;
    };
    expect(await statuses(KNOWN)).toEqual([200, 200, 200, 429]);
    expect(await statuses(unknown)).toEqual([401, 401, 401, 429]);
    // Only the allowed ones reached the registry.
    expect(h.registry.requests.length - forwarded).toBe(6);

    const [a, b] = [await post(KNOWN), await post(unknown)];
    for (const res of [a, b]) {
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('60');
      expect(await res.text()).toBe('{"errors":["rate_limited"]}');
    }
    clock.advance(30_000);
    expect((await post(KNOWN)).headers.get('retry-after')).toBe('30');
    clock.advance(30_000);
    expect((await post(KNOWN)).status).toBe(200);
  });
});
