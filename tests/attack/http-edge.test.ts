import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { basic, me } from '../support/host';
import { startStack, type Stack } from '../support/stack';
import { createVictim, expectNoSecretsInLogs, expectStillServing, openSilent, portOf, rawExchange, within, type Victim } from './support/attack-kit';

const UNAUTHORIZED_FETCH = '{"errors":["invalid_host_sync_credentials"]}';
const CONTRACT_CODE = /^\{"errors":\["[a-z_]+"\]\}$/;

// Attacks on the HTTP edge of the distributed deployment (every service its own
// process). After each one: every service is healthy and a valid user is served.
describe('attack: the HTTP edge', () => {
  let stack: Stack;
  let alice: Victim;
  let bob: Victim;
  let gw: number;

  beforeAll(async () => {
    stack = await startStack();
    gw = portOf(stack.gatewayUrl);
    alice = await createVictim(stack);
    bob = await createVictim(stack);
  });
  afterEach(async () => {
    await expectStillServing(stack, alice);
  });
  afterAll(async () => {
    if (stack) expectNoSecretsInLogs(stack, [alice?.secret, alice?.host_sync_client_secret, alice?.token, bob?.secret, bob?.host_sync_client_secret, bob?.token]);
    await stack?.stop();
  });

  const api = (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) => fetch(`${stack.gatewayUrl}${path}`, init);

  it('identity headers sent by a client are ignored: identity comes only from the token', async () => {
    const spoof = {
      'x-relay-tenant-id': bob.tenant_id,
      'x-relay-user-id': bob.userId,
      'x-relay-expires-at': '99999999999',
      'x-internal-token': stack.internalToken,
      'X-Relay-Tenant-Id': bob.tenant_id,
      'x-relay-anything': 'x',
    };
    // With a valid token: the token's identity, not the headers'.
    const res = await api('/api/v1/me', { headers: { authorization: `Bearer ${alice.token}`, ...spoof } });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ tenant_id: alice.tenant_id, user_id: alice.userId });
    // A publish lands in alice's tenant under alice's user, never in bob's.
    const channel = `spoof-${randomUUID().slice(0, 8)}`;
    const pub = await api(`/api/v1/channels/${channel}/messages`, { method: 'POST', headers: { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json', ...spoof }, body: '{"data":"x"}' });
    expect(pub.status).toBe(201);
    expect(await pub.json()).toMatchObject({ user_id: alice.userId });
    const bobs = await api(`/api/v1/channels/${channel}/messages`, { headers: { authorization: `Bearer ${bob.token}` } });
    expect(((await bobs.json()) as { messages: unknown[] }).messages).toEqual([]);
    // Without a token, or with a bad one, the headers buy nothing.
    for (const authorization of [undefined, 'Bearer x', `Bearer ${stack.internalToken}`, `Bearer ${stack.adminToken}`]) {
      const r = await api('/api/v1/me', { headers: { ...(authorization ? { authorization } : {}), ...spoof } });
      expect(r.status).toBe(401);
      expect(await r.text()).toBe('{"errors":["invalid_or_missing_token"]}');
    }
    // Underscores, duplicates and list forms written on the wire.
    const raw = await rawExchange(
      gw,
      'GET /api/v1/me HTTP/1.1\r\nHost: x\r\n' +
        `x_relay_tenant_id: ${bob.tenant_id}\r\nx-relay-tenant-id: ${bob.tenant_id}\r\nx-relay-tenant-id: ${bob.tenant_id}, ${alice.tenant_id}\r\n` +
        `x-internal-token: ${stack.internalToken}\r\nx-internal-token: ${stack.internalToken}\r\nConnection: close\r\n\r\n`,
      { responses: 1 },
    );
    expect(raw.statuses).toEqual([401]);
  });

  it('path tricks never reach the admin API, never answer 500', async () => {
    const paths = [
      '/api/v1/../admin/tenants',
      '/api/v1/%2e%2e/admin/tenants',
      '/api/v1/%2E%2E/%2E%2E/admin/tenants',
      '/api/v1/..%2f..%2fadmin/tenants',
      '/api/v1/channels/..%2F..%2F..%2Fadmin%2Ftenants/messages',
      '/api/v1/channels/a%2Fb/messages',
      '/api/v1/channels/a%00b/messages',
      '//api/v1/me',
      '/api/v1//me',
      '/api/v1/./me',
      '/api/host/tenants/x/../../../admin/tenants',
      '/api/host/tenants/%2e%2e%2f%2e%2e%2fadmin%2ftenants/jwt_secret/fetch',
      '/admin/tenants',
      '/admin/tenants/',
      '/ADMIN/tenants',
      '/%61dmin/tenants',
      '/api/v1/me%00',
      '/api/v1/me;/../../admin/tenants',
      `/api/v1/${'a/'.repeat(3000)}`,
      `/api/v1/channels/${'x'.repeat(7000)}/messages`,
    ];
    const targets = [...paths, `http://${new URL(stack.registryUrl).host}/admin/tenants`, `http://127.0.0.1:${gw}/admin/tenants`, '*'];
    for (const target of targets) {
      for (const auth of ['', `Authorization: Bearer ${alice.token}\r\n`, `Authorization: Bearer ${stack.adminToken}\r\n`]) {
        const a = await rawExchange(gw, `GET ${target} HTTP/1.1\r\nHost: x\r\n${auth}Connection: close\r\n\r\n`, { responses: 1 });
        const what = `${target.slice(0, 80)} (${auth ? auth.slice(0, 30) : 'no token'})`;
        expect(a.statuses, what).toHaveLength(1);
        const status = a.statuses[0]!;
        expect(status, what).not.toBe(500);
        // Only the user's own /me may succeed.
        if (status === 200) {
          expect(auth, what).toContain(alice.token);
          expect(a.text, what).toContain(`"tenant_id":"${alice.tenant_id}"`);
        }
        expect(a.text, what).not.toMatch(/"tenants":|host_sync_client_id|next_cursor/);
        expect([200, 400, 401, 404, 405, 414, 431], what).toContain(status);
      }
    }
    // A path longer than Node's header limit: refused by the HTTP layer, the gateway lives.
    const huge = await rawExchange(gw, `GET /api/v1/${'a'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, { responses: 1 });
    expect(huge.statuses.length).toBeLessThanOrEqual(1);
    if (huge.statuses.length === 1) expect([400, 414, 431]).toContain(huge.statuses[0]);
  });

  describe('request smuggling shapes on raw sockets: 400, or one request, never two', () => {
    // The smuggled request, and a last pipelined request that closes the
    // connection: a well-behaved server answers [outer, sentinel] or [400];
    // three answers mean the smuggled request was answered on its own.
    const inner = 'GET /api/v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
    const sentinel = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
    const shapes = (auth: string, path: string): Array<[string, string]> => [
      ['CL and TE', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${5 + inner.length}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${inner}`],
      ['TE and CL', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: chunked\r\nContent-Length: ${5 + inner.length}\r\n\r\n0\r\n\r\n${inner}`],
      ['duplicate Content-Length, different values', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: 0\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`],
      ['duplicate Content-Length, equal values', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: ${inner.length}\r\nContent-Length: ${inner.length}\r\n\r\n${inner}`],
      ['Content-Length list', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: ${inner.length}, 0\r\n\r\n${inner}`],
      ['Transfer-Encoding: chunked, identity', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n${inner}`],
      ['Transfer-Encoding: identity', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: identity\r\nContent-Length: 0\r\n\r\n${inner}`],
      ['Transfer-Encoding: xchunked', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n${inner}`],
      ['space before the colon', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding : chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n${inner}`],
      ['obs-fold Transfer-Encoding', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Length: 0\r\nX-Folded: a\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n${inner}`],
      ['bare LF line endings', `POST ${path} HTTP/1.1\nHost: x\n${auth.replace('\r\n', '\n')}Content-Length: 0\n\n${inner}`],
      ['chunk size overflow', `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF1\r\nx\r\n0\r\n\r\n${inner}`],
    ];

    for (const route of ['api', 'host-fetch'] as const) {
      it(`${route}`, async () => {
        const auth = route === 'api' ? `Authorization: Bearer ${alice.token}\r\n` : `Authorization: ${basic(alice.host_sync_client_id, alice.host_sync_client_secret)}\r\n`;
        const path = route === 'api' ? '/api/v1/channels/smuggle/messages' : `/api/host/tenants/${alice.tenant_id}/jwt_secret/fetch`;
        const failures: string[] = [];
        for (const [name, bytes] of shapes(auth, path)) {
          const a = await rawExchange(gw, bytes + sentinel);
          const s = a.statuses;
          const ok = a.closed && !s.includes(500) && (s.length === 1 ? s[0]! >= 400 && s[0]! < 500 : s.length === 2 && a.text.trimEnd().endsWith('{"status":"ok"}'));
          if (!ok) failures.push(`${name}: ${JSON.stringify(s)} closed=${a.closed} ${JSON.stringify(a.text.slice(0, 400))}`);
        }
        expect(failures).toEqual([]);
      });
    }
  });

  it('hop-by-hop headers on the host-sync fetch and on /api/v1 do not crash the gateway', async () => {
    const hop: Array<[string, string]> = [
      ['Trailer', 'X-Foo'],
      ['TE', 'trailers'],
      ['Connection', 'x-listed, close'],
      ['Upgrade', 'h2c'],
      ['Upgrade', 'websocket'],
      ['Proxy-Authorization', 'Basic eDp5'],
      ['Proxy-Connection', 'keep-alive'],
      ['Keep-Alive', 'timeout=1'],
    ];
    const routes = [
      { path: `/api/host/tenants/${alice.tenant_id}/jwt_secret/fetch`, auth: `Authorization: ${basic(alice.host_sync_client_id, alice.host_sync_client_secret)}`, ok: 200 },
      { path: '/api/v1/channels/hop/messages', auth: `Authorization: Bearer ${alice.token}`, ok: 201 },
    ];
    for (const r of routes) {
      for (const [name, value] of hop) {
        for (const body of ['', '{"data":1}']) {
          const a = await rawExchange(gw, `POST ${r.path} HTTP/1.1\r\nHost: x\r\n${r.auth}\r\n${name}: ${value}\r\nX-Listed: 1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}${name === 'Connection' ? '' : '\r\nConnection: close'}\r\n\r\n${body}`, { responses: 1 });
          const what = `${r.path} ${name}: ${value} body=${JSON.stringify(body)}`;
          expect(a.statuses, what).toHaveLength(1);
          // The host fetch takes no body; the publish needs one.
          const expected = r.ok === 201 && body === '' ? 400 : r.ok;
          expect(a.statuses[0], `${what}\n${a.text.slice(0, 300)}`).toBe(expected);
        }
      }
      expect((await fetch(`${stack.gatewayUrl}/healthz`)).status).toBe(200);
    }
  });

  it("a client's Connection: close is honoured on proxied answers; upstream hop-by-hop response headers are not passed on", async () => {
    const requests = [
      `GET /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.token}\r\nConnection: close\r\n\r\n`,
      `POST /api/host/tenants/${randomUUID()}/jwt_secret/fetch HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    ];
    for (const bytes of requests) {
      const a = await rawExchange(gw, bytes, { timeoutMs: 3000 });
      const head = a.text.slice(0, a.text.indexOf('\r\n\r\n'));
      expect(a.statuses, head).toHaveLength(1);
      expect(head).not.toMatch(/\r\nkeep-alive:/i);
      expect(head).toMatch(/\r\nconnection: close/i);
      expect(a.closed, `not closed after the answer:\n${head}`).toBe(true);
    }
  });

  it('JSON nested 5,000 deep in a REST body is 400 invalid_body, not 500', async () => {
    for (const body of [`{"data":${'['.repeat(5000)}${']'.repeat(5000)}}`, `{"data":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`, `${'['.repeat(5000)}${']'.repeat(5000)}`]) {
      const res = await api('/api/v1/channels/deep/messages', { method: 'POST', headers: { authorization: `Bearer ${alice.token}`, 'content-type': 'application/json' }, body });
      expect(res.status).toBe(400);
      expect(await res.text()).toBe('{"errors":["invalid_body"]}');
    }
  });

  it('1,000 request headers through the gateway: a clear 4xx with a contract body', async () => {
    const headers = Array.from({ length: 1000 }, (_, i) => `X-Flood-${i}: ${i}\r\n`).join('');
    for (const path of ['/api/v1/me', `/api/host/tenants/${alice.tenant_id}/jwt_secret/fetch`]) {
      const method = path.endsWith('fetch') ? 'POST' : 'GET';
      const a = await rawExchange(gw, `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.token}\r\n${headers}Content-Length: 0\r\nConnection: close\r\n\r\n`, { responses: 1 });
      expect(a.statuses, path).toHaveLength(1);
      const status = a.statuses[0]!;
      expect(status >= 400 && status < 500, `${path}: ${status}`).toBe(true);
      const body = a.text.slice(a.text.indexOf('\r\n\r\n') + 4);
      expect(body, `${path}: ${a.text.slice(0, 300)}`).toMatch(CONTRACT_CODE);
    }
  });

  it('percent-encoding that does not decode in the host-sync path: the byte-identical 401', async () => {
    const answer = async (tenant: string) => {
      const a = await rawExchange(gw, `POST /api/host/tenants/${tenant}/jwt_secret/fetch HTTP/1.1\r\nHost: x\r\nAuthorization: ${basic(alice.host_sync_client_id, alice.host_sync_client_secret)}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`, { responses: 1 });
      const [head = '', body = ''] = a.text.split('\r\n\r\n');
      const pick = (name: string) => new RegExp(`\\r\\n${name}: ([^\\r]*)`, 'i').exec(head)?.[1];
      return { status: a.statuses[0], body, www: pick('www-authenticate'), cache: pick('cache-control'), pragma: pick('pragma'), type: pick('content-type') };
    };
    const reference = await answer(randomUUID());
    expect(reference).toEqual({ status: 401, body: UNAUTHORIZED_FETCH, www: 'Basic realm="service-relay"', cache: 'no-store, private', pragma: 'no-cache', type: expect.any(String) });
    for (const tenant of ['%ZZ', '%', '%E0%A4%A', '%2', `${alice.tenant_id}%`, `%${alice.tenant_id}`, '%C0%AF', '%FF', `${alice.tenant_id.slice(0, -1)}%ZZ`]) {
      expect(await answer(tenant), tenant).toEqual(reference);
    }
  });

  it('slowloris: headers dribbled a byte at a time and silent connections do not stop others being served; silent ones are closed', async () => {
    const rt = portOf(stack.realtimeWs[0]!);
    // Connections that never send a byte, to the gateway and to a realtime instance.
    const silent = await Promise.all([openSilent(gw), openSilent(gw), openSilent(rt)]);
    // One request dribbled a byte at a time, each byte written once the previous was flushed.
    const dribble = (async () => {
      const { socket } = await openSilent(gw);
      const chunks: Buffer[] = [];
      socket.on('data', (d: Buffer) => chunks.push(d));
      const bytes = Buffer.from(`GET /api/v1/me HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${alice.token}\r\nConnection: close\r\n\r\n`);
      const deadline = Date.now() + 8000;
      for (let i = 0; i < bytes.length && !socket.destroyed && Date.now() < deadline; i++) {
        await new Promise<void>((r) => socket.write(bytes.subarray(i, i + 1), () => r()));
        await new Promise<void>((r) => setImmediate(r));
      }
      await within(new Promise((r) => socket.once('close', r)), 5000);
      socket.destroy();
      return Buffer.concat(chunks).toString('latin1');
    })();
    // Meanwhile others are served, promptly.
    for (let i = 0; i < 5; i++) {
      const started = Date.now();
      expect((await me(stack.gatewayUrl, alice.token)).status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2000);
    }
    await expectStillServing(stack, alice);
    const dribbled = await dribble;
    // Answered as one whole request, or cut off by a header deadline: never a 500.
    expect(dribbled).not.toMatch(/^HTTP\/1\.1 5/);
    // The connection-guard work sets a first-byte deadline (FIRST_BYTE_TIMEOUT_MS, 10 s by default):
    // a connection that never sends a byte is closed by then.
    const closedAfter = await Promise.all(silent.map((s) => within(s.closed, 14_000)));
    for (const s of silent) s.socket.destroy();
    expect(closedAfter.map((ms) => ms !== undefined)).toEqual([true, true, true]);
  }, 40_000);
});
