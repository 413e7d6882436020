import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { fakeIdentity } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
/** A JWS-shaped token naming `tenant` (what a host would sign; the fake verifier decides its verdict). */
const tokenFor = (tenant: string) => `${b64({ alg: 'HS256', typ: 'JWT', kid: tenant })}.${b64({ tenant_id: tenant, n: randomUUID() })}.sig`;
const basic = (secret: string) => `Basic ${Buffer.from(`hs_client:${secret}`).toString('base64')}`;

describe('edge-gateway: per-address budget of refused credentials', () => {
  let h: GatewayHarness;
  // TRUST_PROXY: the tests play several client addresses through X-Forwarded-For's last hop.
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { REFUSED_AUTH_RATE_LIMIT: '3', REFUSED_AUTH_BURST: '3', TRUST_PROXY: 'true' } });
    h.registry.handler = (req, res) => {
      if (req.headers.authorization === basic('right')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jwt_secret_primary":"s"}');
        return;
      }
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Basic realm="service-relay"' });
      res.end('{"errors":["invalid_host_sync_credentials"]}');
    };
  });
  afterAll(() => h.stop());

  const me = (address: string, token?: string) => fetch(`${h.url}/api/v1/me`, { headers: { 'x-forwarded-for': address, ...(token !== undefined && { authorization: `Bearer ${token}` }) } });
  const hostFetch = (address: string, tenant: string, secret: string) =>
    fetch(`${h.url}/api/host/tenants/${tenant}/jwt_secret/fetch`, { method: 'POST', headers: { 'x-forwarded-for': address, authorization: basic(secret) } });
  const expectLimited = async (res: Response) => {
    expect(res.status).toBe(429);
    expect(await res.json()).toEqual({ errors: ['rate_limited'] });
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(res.headers.get('x-relay-limit')).toBe('3');
  };

  it('past its budget an address gets 429 without a verifier call; valid tokens of a served tenant are still judged and served, from the same address', async () => {
    const tenant = randomUUID();
    const good = tokenFor(tenant);
    h.verifier.allow(good, fakeIdentity({ tenantId: tenant }));
    expect((await me('198.51.100.1', good)).status).toBe(200);

    const attacker = '203.0.113.9';
    expect((await me(attacker)).status).toBe(401);
    expect((await me(attacker, tokenFor(randomUUID()))).status).toBe(401);
    expect((await me(attacker, 'garbage')).status).toBe(401);
    const calls = h.verifier.calls;
    await expectLimited(await me(attacker, tokenFor(randomUUID())));
    await expectLimited(await me(attacker));
    expect(h.verifier.calls, 'refused without asking the verifier').toBe(calls);

    // A fresh valid token of a tenant served recently, from the same address: judged, served.
    const fresh = tokenFor(tenant);
    h.verifier.allow(fresh, fakeIdentity({ tenantId: tenant }));
    expect((await me(attacker, fresh)).status).toBe(200);
    // A refused one of that tenant: the verifier is asked, and the answer is the same 429 as for anything else.
    await expectLimited(await me(attacker, tokenFor(tenant)));
    expect(h.verifier.calls).toBe(calls + 2);
    // Other addresses are not affected.
    expect((await me('203.0.113.10', tokenFor(randomUUID()))).status).toBe(401);
  });

  it('counts the registry\'s host-sync refusals; past the budget only a credential it accepted recently is forwarded', async () => {
    const tenant = randomUUID();
    const host = '192.0.2.50';
    expect((await hostFetch(host, tenant, 'right')).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await hostFetch(host, tenant, `wrong-${i}`)).status).toBe(401);
    const forwarded = h.registry.requests.length;
    await expectLimited(await hostFetch(host, tenant, 'wrong-again'));
    await expectLimited(await hostFetch(host, randomUUID(), 'right'));
    expect(h.registry.requests.length, 'not forwarded').toBe(forwarded);
    expect((await hostFetch(host, tenant, 'right')).status, 'the credential accepted before still works').toBe(200);
    // And the same address's unverified tokens are limited too: one budget per address.
    await expectLimited(await me(host, tokenFor(randomUUID())));
  });

  it('counts the 429s on its metrics and logs them at debug only (a flood of refusals must not become a flood of logs)', async () => {
    const lines = h.logs.map((l) => JSON.parse(l) as { msg: string; status?: number; level: number }).filter((l) => l.msg === 'request');
    expect(lines.filter((l) => l.status === 429).map((l) => l.level)).toContain(20);
    expect(lines.filter((l) => l.status === 429).every((l) => l.level === 20)).toBe(true);
    expect(lines.filter((l) => l.status === 401).every((l) => l.level === 30)).toBe(true);
    const text = await (await fetch(`${h.url}/metrics`)).text();
    expect(text).toMatch(/gateway_refused_auth_limited_total\{route="api_v1"[^}]*\} [1-9]/);
    expect(text).toMatch(/gateway_refused_auth_limited_total\{route="host_fetch"[^}]*\} [1-9]/);
  });
});

describe('edge-gateway: load shedding', () => {
  let h: GatewayHarness;
  const held: ServerResponse[] = [];
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { MAX_REQUESTS_IN_FLIGHT: '2' } });
    h.realtime.handler = (_req, res) => void held.push(res);
  });
  afterAll(async () => {
    for (const res of held) res.destroy();
    await h.stop();
  });

  it('past MAX_REQUESTS_IN_FLIGHT a new request gets 503 unavailable with Retry-After before any verifier call; health and metrics are exempt; room frees as answers go out', async () => {
    const token = tokenFor(randomUUID());
    h.verifier.allow(token, fakeIdentity());
    const get = () => fetch(`${h.url}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
    const pending = [get(), get()];
    const deadline = Date.now() + 5000;
    while (held.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(held).toHaveLength(2);

    const calls = h.verifier.calls;
    const shed = await get();
    expect(shed.status).toBe(503);
    expect(await shed.json()).toEqual({ errors: ['unavailable'] });
    expect(shed.headers.get('retry-after')).toBe('1');
    expect(shed.headers.get('x-relay-limit')).toBe('2');
    expect(h.verifier.calls).toBe(calls);
    expect((await fetch(`${h.url}/healthz`)).status).toBe(200);
    const metrics = await (await fetch(`${h.url}/metrics`)).text();
    expect(metrics).toMatch(/gateway_shed_requests_total\{reason="in_flight"[^}]*\} 1/);
    expect(metrics).toMatch(/gateway_requests_in_flight\{[^}]*\} 2/);

    for (const res of held.splice(0)) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    expect((await Promise.all(pending)).map((r) => r.status)).toEqual([200, 200]);
    h.realtime.handler = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    expect((await get()).status).toBe(200);
  });
});
