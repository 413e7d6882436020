import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
// A test may start a service in-process; the package itself never imports one.
import { startTestRegistry, type TestRegistry } from '../../../services/tenant-registry/src/testing/test-registry';
import { createHostClient, HostClientError, parseRetryAfter, type HostClient } from './index';

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

  it('refuses misuse with a TypeError before any fetch', async () => {
    const c = client();
    await expect(c.signUserToken('not-a-uuid', { ttlSeconds: 60 })).rejects.toBeInstanceOf(TypeError);
    await expect(c.signUserToken(randomUUID(), { ttlSeconds: 0 })).rejects.toBeInstanceOf(TypeError);
    expect(() => createHostClient({ baseUrl: 'nope', tenantId: 'x', clientId: 'y', clientSecret: 'z' })).toThrow(TypeError);
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
    const c = client({ tenantId: t.tenant_id, clientId: t.host_sync_client_id, clientSecret: t.host_sync_client_secret, refreshIntervalMs: 100, onRefreshError });
    await c.refresh();
    // A new host-sync secret makes the old one dead: the next background fetch is refused.
    const next = (await (await reg.admin('POST', `/admin/tenants/${t.tenant_id}/host_sync/rotate`)).json()) as Created;
    await vi.waitFor(() => expect(onRefreshError).toHaveBeenCalled(), { timeout: 5000, interval: 20 });
    expect((onRefreshError.mock.calls[0]![0] as HostClientError).code).toBe('invalid_credentials');
    const token = await c.signUserToken(randomUUID(), { ttlSeconds: 60 });
    // The JWT secret did not change, so the token the host still signs verifies.
    await expect(jwtVerify(token, key(await rawSecret(reg, { ...t, host_sync_client_secret: next.host_sync_client_secret })))).resolves.toBeTruthy();
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
