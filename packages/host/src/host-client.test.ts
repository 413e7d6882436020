import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
// A test may start a service in-process; the package itself never imports one.
import { startTestRegistry, type TestRegistry } from '../../../services/tenant-registry/src/testing/test-registry';
import { createHostClient, HostClientError, parseRetryAfter, type HostClient } from './index.js';

interface Created {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

async function rawSecret(reg: TestRegistry, t: Created): Promise<string> {
  const res = await fetch(`${reg.baseUrl}/api/host/tenants/${t.tenant_id}/jwt_secret/fetch`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${t.host_sync_client_id}:${t.host_sync_client_secret}`).toString('base64')}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
}

const key = (secret: string) => new TextEncoder().encode(secret);

async function caught(p: Promise<unknown>): Promise<HostClientError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(HostClientError);
    return err as HostClientError;
  }
  throw new Error('expected a HostClientError');
}

/** Neither the message nor anything reachable from the error names a secret. */
function expectNoSecret(err: HostClientError, ...secrets: string[]) {
  const seen = `${err.message} ${String(err.cause)} ${JSON.stringify(err)} ${err.stack ?? ''}`;
  for (const s of secrets) expect(seen).not.toContain(s);
}

/** A local HTTP server answering every request with `handler`. */
async function stub(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

describe('host client against a real registry', () => {
  let reg: TestRegistry;
  let tenant: Created;
  const clients: HostClient[] = [];
  const client = (over: Partial<Parameters<typeof createHostClient>[0]> = {}) => {
    const c = createHostClient({
      baseUrl: reg.baseUrl,
      tenantId: tenant.tenant_id,
      clientId: tenant.host_sync_client_id,
      clientSecret: tenant.host_sync_client_secret,
      refreshIntervalMs: 0,
      ...over,
    });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    reg = await startTestRegistry({ env: { HOST_FETCH_RATE_LIMIT: '2' }, logLevel: 'warn' });
    tenant = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await reg?.stop();
  });

  it('fetches the secret and signs a token of the contract shape, every claim checked', async () => {
    const c = client();
    const userId = randomUUID();
    const before = Math.floor(Date.now() / 1000);
    const token = await c.signUserToken(userId, { ttlSeconds: 600 });
    expect(c.fetchedAt).toBeTypeOf('number');
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'HS256', typ: 'JWT', kid: tenant.tenant_id });
    const { payload } = await jwtVerify(token, key(await rawSecret(reg, tenant)), { algorithms: ['HS256'], issuer: 'service-relay', audience: 'service-relay' });
    expect(Object.keys(payload).sort()).toEqual(['aud', 'exp', 'iat', 'iss', 'tenant_id', 'user_id']);
    // iat: a user-level revocation (revokeUserTokens) refuses tokens without it.
    expect(payload.iat! - before).toBeGreaterThanOrEqual(0);
    expect(payload.iat! - before).toBeLessThanOrEqual(1);
    expect(payload).toMatchObject({ iss: 'service-relay', aud: 'service-relay', tenant_id: tenant.tenant_id, user_id: userId });
    expect(Number.isInteger(payload.exp)).toBe(true);
    expect(payload.exp! - before).toBeGreaterThanOrEqual(600);
    expect(payload.exp! - before).toBeLessThanOrEqual(601);
  });

  it('passes cap through unchanged when given', async () => {
    const cap = { 'rooms:*': ['subscribe', 'publish'], lobby: ['history'] } as const;
    const token = await client().signUserToken(randomUUID(), { ttlSeconds: 60, cap });
    const { payload } = await jwtVerify(token, key(await rawSecret(reg, tenant)));
    expect(payload.cap).toEqual(cap);
  });

  it('refuses misuse of createHostClient with a TypeError', () => {
    expect(() => createHostClient({ baseUrl: 'nope', tenantId: randomUUID(), clientId: 'y', clientSecret: 'z' })).toThrow(TypeError);
    // kid == tenant_id, a lowercase UUID as issued: anything else would sign tokens the verifier refuses (bad_tenant_id).
    expect(() => createHostClient({ baseUrl: reg.baseUrl, tenantId: 'x', clientId: 'y', clientSecret: 'z' })).toThrow(/lowercase UUID/);
    expect(() => createHostClient({ baseUrl: reg.baseUrl, tenantId: randomUUID().toUpperCase(), clientId: 'y', clientSecret: 'z' })).toThrow(TypeError);
    expect(() => createHostClient({ baseUrl: reg.baseUrl, tenantId: randomUUID(), clientId: 'y', clientSecret: 'z', maxTokenLifetimeSeconds: 0 })).toThrow(TypeError);
  });

  it('signUserToken(userId) works with no options: one hour, no cap', async () => {
    const token = await client().signUserToken(randomUUID());
    const { payload } = await jwtVerify(token, key(await rawSecret(reg, tenant)));
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(payload.cap).toBeUndefined();
  });

  it('refuses to sign what the relay would refuse, naming the rule, before any fetch', async () => {
    const fetchSpy = vi.fn(globalThis.fetch);
    const c = client({ fetch: fetchSpy });
    const c10 = client({ fetch: fetchSpy, maxTokenLifetimeSeconds: 600 });
    const cases: [Promise<string>, string, RegExp][] = [
      [c.signUserToken('alice'), 'bad_user_id', /UUID/],
      [c.signUserToken(randomUUID(), { ttlSeconds: 0 }), 'bad_ttl', /positive integer/],
      [c.signUserToken(randomUUID(), { ttlSeconds: 1.5 }), 'bad_ttl', /positive integer/],
      // Two days: over the default 86 400 s.
      [c.signUserToken(randomUUID(), { ttlSeconds: 172_800 }), 'lifetime_too_long', /172800 is over .* 86400 s/],
      [c10.signUserToken(randomUUID(), { ttlSeconds: 601 }), 'lifetime_too_long', /601 is over .* 600 s/],
      [c.signUserToken(randomUUID(), { cap: { '*': ['subscribe'] } }), 'bad_cap', /bare "\*" is refused/],
      [c.signUserToken(randomUUID(), { cap: { 'a*b': ['subscribe'] } }), 'bad_cap', /pattern "a\*b"/],
      [c.signUserToken(randomUUID(), { cap: { lobby: [] } }), 'bad_cap', /non-empty array/],
      [c.signUserToken(randomUUID(), { cap: { lobby: ['read' as 'publish'] } }), 'bad_cap', /non-empty array of subscribe/],
      [c.signUserToken(randomUUID(), { cap: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, ['publish']])) }), 'bad_cap', /at most 64/],
    ];
    for (const [p, rule, message] of cases) {
      const err = await caught(p);
      expect(err).toMatchObject({ code: 'token_rule', rule });
      expect(err.message).toMatch(message);
      expect(err.message).toContain(rule);
    }
    expect(fetchSpy).not.toHaveBeenCalled();
    // The limits themselves are allowed: the longest lifetime, 64 patterns, an empty cap (no channel at all).
    const ok = [
      await c.signUserToken(randomUUID(), { ttlSeconds: 86_400 }),
      await c10.signUserToken(randomUUID(), { ttlSeconds: 600 }),
      await c.signUserToken(randomUUID(), { cap: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`c${i}*`, ['publish']])) }),
      await c.signUserToken(randomUUID(), { cap: {} }),
    ];
    expect(ok).toHaveLength(4);
  });

  it('refreshes on demand after a rotation: new tokens use the new primary, old and new both verify until expire_previous', async () => {
    const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
    const c = client({ tenantId: t.tenant_id, clientId: t.host_sync_client_id, clientSecret: t.host_sync_client_secret });
    const oldSecret = await rawSecret(reg, t);
    const userId = randomUUID();
    const before = await c.signUserToken(userId, { ttlSeconds: 600 });
    expect(await c.refresh()).toEqual({ changed: false, etag: '"k1"' });

    const rotated = await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/rotate`);
    expect(rotated.status).toBe(200);
    expect(((await rotated.json()) as { has_previous_secret: boolean }).has_previous_secret).toBe(true);
    // Until the host refreshes it keeps signing with the old secret, which still verifies as previous.
    const stale = await c.signUserToken(userId, { ttlSeconds: 600 });
    await expect(jwtVerify(stale, key(oldSecret))).resolves.toBeTruthy();

    expect(await c.refresh()).toEqual({ changed: true, etag: '"k2"' });
    const newSecret = await rawSecret(reg, t);
    expect(newSecret).not.toBe(oldSecret);
    const after = await c.signUserToken(userId, { ttlSeconds: 600 });
    await expect(jwtVerify(after, key(newSecret))).resolves.toBeTruthy();
    await expect(jwtVerify(after, key(oldSecret))).rejects.toThrow();
    await expect(jwtVerify(before, key(oldSecret))).resolves.toBeTruthy();
    // The whole-stack test (tests/host-client.test.ts) shows the verifier accepting both, then only the new one.
    const expired = await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/expire_previous`);
    expect(((await expired.json()) as { has_previous_secret: boolean }).has_previous_secret).toBe(false);
    expect((await c.refresh()).changed).toBe(false);
  });

  it('refreshes on its interval and reports the change', async () => {
    const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
    const onSecretChange = vi.fn();
    const c = client({ tenantId: t.tenant_id, clientId: t.host_sync_client_id, clientSecret: t.host_sync_client_secret, refreshIntervalMs: 100, onSecretChange });
    const first = await c.signUserToken(randomUUID(), { ttlSeconds: 60 });
    const fetchedAt = c.fetchedAt!;
    await vi.waitFor(() => expect(c.fetchedAt).toBeGreaterThan(fetchedAt), { timeout: 5000, interval: 20 });
    expect(onSecretChange).not.toHaveBeenCalled();
    await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/rotate`);
    await vi.waitFor(() => expect(onSecretChange).toHaveBeenCalledTimes(1), { timeout: 5000, interval: 20 });
    const newSecret = await rawSecret(reg, t);
    const second = await c.signUserToken(randomUUID(), { ttlSeconds: 60 });
    await expect(jwtVerify(second, key(newSecret))).resolves.toBeTruthy();
    await expect(jwtVerify(first, key(newSecret))).rejects.toThrow();
  });

  it('a wrong host-sync secret is invalid_credentials, and the error names no secret', async () => {
    const wrong = `wrong-${randomUUID()}`;
    const err = await caught(client({ clientSecret: wrong }).refresh());
    expect(err.code).toBe('invalid_credentials');
    expect(err.status).toBe(401);
    expectNoSecret(err, wrong, tenant.host_sync_client_secret);
  });

  it('a failed background refresh is reported and the cached secret stays in use', async () => {
    const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
    const onRefreshError = vi.fn();
    let answer: 'relay' | 'down' = 'relay';
    const flaky: typeof fetch = (input, init) => (answer === 'relay' ? fetch(input, init) : Promise.reject(new TypeError('fetch failed')));
    const c = client({ tenantId: t.tenant_id, clientId: t.host_sync_client_id, clientSecret: t.host_sync_client_secret, refreshIntervalMs: 100, onRefreshError, fetch: flaky });
    await c.refresh();
    answer = 'down';
    await vi.waitFor(() => expect(onRefreshError).toHaveBeenCalled(), { timeout: 5000, interval: 20 });
    expect((onRefreshError.mock.calls[0]![0] as HostClientError).code).toBe('unavailable');
    const token = await c.signUserToken(randomUUID(), { ttlSeconds: 60 });
    await expect(jwtVerify(token, key(await rawSecret(reg, t)))).resolves.toBeTruthy();
  });

  it('after revoke_all the host learns it (onCredentialsRejected), stops signing with the dead secret, and takes the new credential while running', async () => {
    const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
    const rejected: HostClientError[] = [];
    const c = client({ tenantId: t.tenant_id, clientId: t.host_sync_client_id, clientSecret: t.host_sync_client_secret, onCredentialsRejected: (e) => rejected.push(e) });
    const before = await c.signUserToken(randomUUID());
    const revoked = await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/revoke_all`);
    expect(revoked.status).toBe(200);
    const next = (await revoked.json()) as Created;
    // The next call with the old credential (a server API call here; a refresh alike) is refused and the cached secret dropped.
    expect((await caught(c.publish('news', 1))).code).toBe('invalid_credentials');
    expect(rejected.map((e) => e.code)).toEqual(['invalid_credentials']);
    expect(c.fetchedAt).toBeUndefined();
    expect((await caught(c.signUserToken(randomUUID()))).code).toBe('invalid_credentials');
    expect(rejected).toHaveLength(2);

    expect(await c.setCredentials({ clientSecret: next.host_sync_client_secret })).toMatchObject({ changed: true });
    const after = await c.signUserToken(randomUUID());
    const secret = await rawSecret(reg, next);
    await expect(jwtVerify(after, key(secret))).resolves.toBeTruthy();
    await expect(jwtVerify(before, key(secret))).rejects.toThrow();
    expect((await c.refresh()).changed).toBe(false);
    await expect(c.setCredentials({ clientSecret: '' })).rejects.toBeInstanceOf(TypeError);
  });

  it('after rotate-host-sync the background refresh reports invalid_credentials to both callbacks', async () => {
    const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
    const onRefreshError = vi.fn();
    const onCredentialsRejected = vi.fn();
    const c = client({ tenantId: t.tenant_id, clientId: t.host_sync_client_id, clientSecret: t.host_sync_client_secret, refreshIntervalMs: 100, onRefreshError, onCredentialsRejected });
    await c.refresh();
    const next = (await (await reg.admin('POST', `/admin/tenants/${t.tenant_id}/host_sync/rotate`)).json()) as Created;
    await vi.waitFor(() => expect(onCredentialsRejected).toHaveBeenCalled(), { timeout: 5000, interval: 20 });
    expect((onRefreshError.mock.calls[0]![0] as HostClientError).code).toBe('invalid_credentials');
    expect((await c.setCredentials({ clientId: next.host_sync_client_id, clientSecret: next.host_sync_client_secret })).changed).toBe(false);
    await expect(jwtVerify(await c.signUserToken(randomUUID()), key(await rawSecret(reg, next)))).resolves.toBeTruthy();
  });

  it('past the failure limit a fetch is rate_limited with the Retry-After seconds', async () => {
    const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
    const bad = client({ tenantId: t.tenant_id, clientId: t.host_sync_client_id, clientSecret: 'not-the-secret' });
    const codes: string[] = [];
    let limited: HostClientError | undefined;
    for (let i = 0; i < 4 && !limited; i++) {
      const err = await caught(bad.refresh());
      codes.push(err.code);
      if (err.code === 'rate_limited') limited = err;
    }
    expect(codes.slice(0, 2)).toEqual(['invalid_credentials', 'invalid_credentials']);
    expect(limited?.status).toBe(429);
    expect(limited?.retryAfterS).toBeGreaterThanOrEqual(1);
    expect(limited?.retryAfterS).toBeLessThanOrEqual(60);
    expect(limited?.message).toContain(String(limited?.retryAfterS));
  });
});

describe('host client failures without a registry', () => {
  const opts = { tenantId: randomUUID(), clientId: 'hs_x', clientSecret: 'host-sync-secret-value', refreshIntervalMs: 0 };

  it('an unreachable server is unavailable', async () => {
    const s = await stub((_req, res) => res.end());
    const url = s.url;
    await s.close();
    const err = await caught(createHostClient({ ...opts, baseUrl: url }).refresh());
    expect(err.code).toBe('unavailable');
    expect(err.status).toBeUndefined();
    expectNoSecret(err, opts.clientSecret);
  });

  it('a server that does not answer in timeoutMs is unavailable', async () => {
    const s = await stub(() => undefined);
    try {
      const err = await caught(createHostClient({ ...opts, baseUrl: s.url, timeoutMs: 100 }).refresh());
      expect(err.code).toBe('unavailable');
      expect(err.message).toContain('timed out');
    } finally {
      await s.close();
    }
  });

  it('a 5xx is unavailable; another status or a body off the contract is invalid_response, naming neither secret nor body', async () => {
    const secretInBody = 'z'.repeat(50);
    let answer: { status: number; body: string } = { status: 503, body: '{"errors":["unavailable"]}' };
    const s = await stub((_req, res) => {
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(answer.body);
    });
    try {
      const c = createHostClient({ ...opts, baseUrl: s.url });
      expect((await caught(c.refresh())).code).toBe('unavailable');
      answer = { status: 404, body: '{"errors":["not_found"]}' };
      expect((await caught(c.refresh())).code).toBe('invalid_response');
      for (const body of ['not json', `{"kid":"other","algorithm":"HS256","issuer":"service-relay","audience":"service-relay","jwt_secret_primary":"${secretInBody}"}`, `{"kid":"${opts.tenantId}","algorithm":"HS256","issuer":"service-relay","audience":"service-relay","jwt_secret_primary":"short"}`]) {
        answer = { status: 200, body };
        const err = await caught(c.refresh());
        expect(err.code).toBe('invalid_response');
        expectNoSecret(err, secretInBody, opts.clientSecret);
      }
      answer = { status: 200, body: `{"kid":"${opts.tenantId}","algorithm":"HS256","issuer":"service-relay","audience":"service-relay","jwt_secret_primary":"${secretInBody}"}` };
      expect(await c.refresh()).toEqual({ changed: false, etag: undefined });
    } finally {
      await s.close();
    }
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('17')).toBe(17);
    expect(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 30)).toUTCString(), Date.UTC(2030, 0, 1))).toBe(30);
    expect(parseRetryAfter(null)).toBe(1);
    expect(parseRetryAfter('soon')).toBe(1);
  });
});
