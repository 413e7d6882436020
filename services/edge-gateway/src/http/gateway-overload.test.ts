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
    // The hold (its own describe below) off: these tests send one request after another on one connection.
    h = await startGatewayHarness({ env: { REFUSED_AUTH_RATE_LIMIT: '3', REFUSED_AUTH_BURST: '3', REFUSED_AUTH_HOLD_MS: '0', TRUST_PROXY: 'true' } });
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
    const text = await (await fetch(`${h.opsUrl}/metrics`)).text();
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
    const metrics = await (await fetch(`${h.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/gateway_shed_requests_total\{reason="in_flight"[^}]*\} 1/);
    expect(metrics).toMatch(/gateway_requests_in_flight\{[^}]*\} 2/);

    for (const res of held.splice(0)) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    expect((await Promise.all(pending)).map((r) => r.status)).toEqual([200, 200]);
    h.realtime.handler = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    expect((await get()).status).toBe(200);
  });
});

describe('edge-gateway: the unproven lane', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { UNPROVEN_AUTH_IN_FLIGHT: '2', UNPROVEN_AUTH_QUEUE: '1', VERIFY_DEADLINE_MS: '3000' } });
  });
  afterAll(() => h.stop());

  const me = (token: string) => fetch(`${h.url}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });

  it('tokens of tenants not served here take turns (2 at the verifier, 1 waiting, then 503 unavailable); a served tenant\'s token passes them', async () => {
    const served = randomUUID();
    const good = tokenFor(served);
    h.verifier.allow(good, fakeIdentity({ tenantId: served }));
    expect((await me(good)).status).toBe(200);

    // Two checks the verifier never answers hold both turns; a third waits.
    const stuck = [tokenFor(randomUUID()), tokenFor(randomUUID())];
    for (const t of stuck) h.verifier.silentFor.add(t);
    const calls = h.verifier.calls;
    const held = stuck.map((t) => me(t));
    const deadline = Date.now() + 5000;
    while (h.verifier.calls < calls + 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(h.verifier.calls).toBe(calls + 2);
    const waiting = me(tokenFor(randomUUID()));

    const started = Date.now();
    const shed = await me(tokenFor(randomUUID()));
    expect(shed.status).toBe(503);
    expect(await shed.json()).toEqual({ errors: ['unavailable'] });
    expect(shed.headers.get('retry-after')).toBe('1');
    expect(Date.now() - started, 'shed at once, not after waiting').toBeLessThan(1000);
    expect(h.verifier.calls, 'neither the waiting nor the shed one reached the verifier').toBe(calls + 2);

    // A fresh token of the tenant served before is judged at once.
    const fresh = tokenFor(served);
    h.verifier.allow(fresh, fakeIdentity({ tenantId: served }));
    expect((await me(fresh)).status).toBe(200);
    const metrics = await (await fetch(`${h.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/gateway_shed_requests_total\{reason="unproven_lane"[^}]*\} 1/);
    expect(metrics).toMatch(/gateway_unproven_lane\{state="active"[^}]*\} 2/);
    expect(metrics).toMatch(/gateway_unproven_lane\{state="queued"[^}]*\} 1/);
    // A host credential the registry has not accepted here takes the same lane.
    const hostShed = await fetch(`${h.url}/api/host/tenants/${randomUUID()}/jwt_secret/fetch`, { method: 'POST', headers: { authorization: basic('never-accepted') } });
    expect(hostShed.status).toBe(503);
    expect(await hostShed.json()).toEqual({ errors: ['unavailable'] });

    // The stuck checks hit their deadline (503 auth_unavailable, never a pass); the waiting one then gets its turn and its verdict.
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([503, 503]);
    expect((await waiting).status).toBe(401);
  });
});

describe('edge-gateway: a connection answered the gateway\'s own 429 is held for its Retry-After', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { REFUSED_AUTH_RATE_LIMIT: '1', REFUSED_AUTH_BURST: '1', REFUSED_AUTH_HOLD_MS: '1000', TRUST_PROXY: 'true' } });
  });
  afterAll(() => h.stop());

  it('its next request is read only after the hold; another connection of the same address is served meanwhile', async () => {
    const { Agent, request } = await import('node:http');
    const served = randomUUID();
    const good = tokenFor(served);
    h.verifier.allow(good, fakeIdentity({ tenantId: served }));
    const address = '203.0.113.77';
    const get = (agent: InstanceType<typeof Agent>, token: string) =>
      new Promise<{ status: number; ms: number }>((resolve, reject) => {
        const started = performance.now();
        const url = new URL(`${h.url}/api/v1/me`);
        const req = request({ host: url.hostname, port: url.port, path: url.pathname, agent, headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': address } }, (res) => {
          res.resume();
          res.once('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
        });
        req.once('error', reject);
        req.end();
      });
    const attacker = new Agent({ keepAlive: true, maxSockets: 1 });
    const neighbour = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await get(neighbour, good)).status).toBe(200);
      expect((await get(attacker, tokenFor(randomUUID()))).status).toBe(401);
      expect((await get(attacker, tokenFor(randomUUID()))).status).toBe(429);
      // The same connection (maxSockets 1, kept alive): not read until the hold is over.
      const next = get(attacker, tokenFor(randomUUID()));
      const meanwhile = await get(neighbour, good);
      expect(meanwhile.status).toBe(200);
      expect(meanwhile.ms).toBeLessThan(500);
      const held = await next;
      expect(held.status).toBe(429);
      expect(held.ms).toBeGreaterThanOrEqual(900);
      const metrics = await (await fetch(`${h.opsUrl}/metrics`)).text();
      expect(metrics).toMatch(/gateway_held_connections_total\{[^}]*\} [1-9]/);
    } finally {
      attacker.destroy();
      neighbour.destroy();
    }
  });
});
