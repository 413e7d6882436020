import { createServer, type Server, type Socket } from 'node:net';
import { fakeIdentity, rawExchange } from '@service-relay/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';
import { GOOD_TOKEN, startStubWsUpstream, type StubWsUpstream } from '../testing/stub-ws-upstream';

interface Opened {
  ws: WebSocket;
  headers: Record<string, string | string[] | undefined>;
}

/** Opens a WebSocket and resolves once it is open (with the 101's headers), or rejects with the refusal's status and body. */
function open(url: string, headers: Record<string, string> = {}): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    let upgradeHeaders: Record<string, string | string[] | undefined> = {};
    ws.once('upgrade', (res) => (upgradeHeaders = res.headers));
    ws.once('open', () => resolve({ ws, headers: upgradeHeaders }));
    ws.once('error', (err) => reject(err));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, headers: res.headers, body })));
    });
  });
}

interface Refusal {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The refusal of an upgrade that should be refused (status 0 if it was accepted). */
const refusal = (p: Promise<unknown>): Promise<Refusal> =>
  p.then(
    () => ({ status: 0, headers: {}, body: '' }),
    (e: Partial<Refusal>) => ({ status: e.status ?? -1, headers: e.headers ?? {}, body: e.body ?? '' }),
  );

function echo(ws: WebSocket, text: string): Promise<string> {
  return new Promise((resolve) => {
    ws.once('message', (d) => resolve(String(d)));
    ws.send(text);
  });
}

describe('edge-gateway: WebSocket upgrades on /ws (one public origin)', () => {
  let a: StubWsUpstream;
  let b: StubWsUpstream;
  let h: GatewayHarness;
  const sockets: WebSocket[] = [];
  const wsUrl = () => `ws://127.0.0.1:${h.gateway.port}/ws`;
  const track = (o: Opened) => {
    sockets.push(o.ws);
    return o;
  };

  beforeAll(async () => {
    a = await startStubWsUpstream();
    b = await startStubWsUpstream();
    h = await startGatewayHarness({ realtime: a, env: { REALTIME_URL: `${a.url},${b.url}`, UPSTREAM_TIMEOUT_MS: '500', CORS_ORIGINS: 'https://app.example' } });
  });
  afterEach(() => {
    for (const ws of sockets.splice(0)) ws.terminate();
    a.upgrades.length = 0;
    b.upgrades.length = 0;
  });
  afterAll(async () => {
    await h.stop();
    await a.close();
    await b.close();
  });

  it('forwards the upgrade with the token (header or access_token), frames both ways, and drops identity and hop-by-hop headers', async () => {
    const viaHeader = track(
      await open(wsUrl(), {
        authorization: `Bearer ${GOOD_TOKEN}`,
        'x-relay-tenant-id': 'forged',
        'x-internal-token': 'forged',
        'keep-alive': 'timeout=5',
        'x-request-id': 'req-123',
      }),
    );
    expect(await echo(viaHeader.ws, 'hi')).toBe('echo:hi');
    expect(viaHeader.headers['x-request-id']).toBe('req-123');
    const viaQuery = track(await open(`${wsUrl()}?access_token=${GOOD_TOKEN}`));
    expect(await echo(viaQuery.ws, 'there')).toBe('echo:there');

    const seen = [...a.upgrades, ...b.upgrades];
    expect(seen).toHaveLength(2);
    const first = seen.find((u) => u.headers.authorization !== undefined)!;
    expect(first.headers.authorization).toBe(`Bearer ${GOOD_TOKEN}`);
    expect(first.headers['x-request-id']).toBe('req-123');
    for (const name of ['x-relay-tenant-id', 'x-internal-token', 'keep-alive']) expect(first.headers[name]).toBeUndefined();
    expect(first.headers.upgrade).toBe('websocket');
    expect(seen.find((u) => u.headers.authorization === undefined)!.url).toBe(`/ws?access_token=${GOOD_TOKEN}`);
  });

  it('drops what Connection lists (a client cannot smuggle a header past as hop-by-hop)', async () => {
    const answer = await rawExchange(
      h.gateway.port,
      `GET /ws?access_token=${GOOD_TOKEN} HTTP/1.1\r\nhost: x\r\nconnection: Upgrade, x-dropme\r\nx-dropme: 1\r\nupgrade: websocket\r\n` +
        'sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
      500,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 101 /);
    const seen = [...a.upgrades, ...b.upgrades];
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers['x-dropme']).toBeUndefined();
    expect(seen[0]!.headers.connection).toBe('Upgrade');
  });

  it('takes the realtime instances in turn, one upgrade each, and counts the open ones', async () => {
    const gauge = async () => Number(/^gateway_websockets (\d+)/m.exec(await (await fetch(`${h.opsUrl}/metrics`)).text())?.[1]);
    const before = await gauge();
    const opened: Opened[] = [];
    for (let i = 0; i < 4; i++) opened.push(track(await open(wsUrl(), { authorization: `Bearer ${GOOD_TOKEN}` })));
    expect([a.upgrades.length, b.upgrades.length]).toEqual([2, 2]);
    expect(await gauge()).toBe(before + 4);
    const closed = new Promise((resolve) => opened[0]!.ws.once('close', resolve));
    opened[0]!.ws.close();
    await closed;
    // The gateway sees the close right after the client does; a bounded wait for the gauge to follow.
    for (let i = 0; i < 50 && (await gauge()) !== before + 3; i++) await new Promise((r) => setImmediate(r));
    expect(await gauge()).toBe(before + 3);
  });

  it('reports one readiness check per realtime instance', async () => {
    const res = await fetch(`${h.opsUrl}/readyz`);
    const body = (await res.json()) as { checks: Record<string, boolean> };
    expect(body.checks).toMatchObject({ realtime: true, realtime_2: true });
  });

  it('round-robins REST requests over the same list', async () => {
    h.verifier.allow('tok-rr', fakeIdentity());
    const before = [a.requests.length, b.requests.length];
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${h.url}/api/v1/me`, { headers: { authorization: 'Bearer tok-rr' } });
      expect(res.status).toBe(200);
    }
    expect([a.requests.length - before[0]!, b.requests.length - before[1]!]).toEqual([2, 2]);
  });

  it("passes realtime's refusal through: 401 with WWW-Authenticate and the JSON body, and the gateway's request id", async () => {
    const refused = await refusal(open(wsUrl(), { authorization: 'Bearer bad', 'x-request-id': 'req-401' }));
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer realm="service-relay", error="invalid_token"');
    expect(refused.headers['x-request-id']).toBe('req-401');
    expect(JSON.parse(refused.body)).toEqual({ errors: ['invalid_or_missing_token'] });
  });

  it('never logs the token; the upgrade is logged with the URL redacted', async () => {
    const secret = 'eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXBheWxvYWQ.c2lnbmF0dXJlLXRoYXQtbXVzdC1ub3QtbGVhaw';
    await refusal(open(`${wsUrl()}?access_token=${secret}`));
    await refusal(open(wsUrl(), { authorization: `Bearer ${secret}` }));
    expect(h.logs.join('\n')).not.toContain(secret);
    const line = h.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'upgrade' && l.status === 401 && String(l.path).includes('?'));
    expect(line).toMatchObject({ route: 'ws', path: '/ws?access_token=[redacted]' });
  });

  it('answers a plain HTTP request to /ws with 426 upgrade_required and Upgrade: websocket, as PROTOCOL.md says (#29)', async () => {
    for (const path of ['/ws', '/ws?access_token=x']) {
      const res = await fetch(`http://127.0.0.1:${h.gateway.port}${path}`);
      expect(res.status, path).toBe(426);
      expect(res.headers.get('upgrade')).toBe('websocket');
      expect(await res.json()).toEqual({ errors: ['upgrade_required'] });
    }
  });

  it('refuses other paths (404) and too many header fields (431) itself, reaching no upstream', async () => {
    const notFound = await refusal(open(`ws://127.0.0.1:${h.gateway.port}/api/v1/me`, { authorization: `Bearer ${GOOD_TOKEN}` }));
    expect(notFound.status).toBe(404);
    expect(JSON.parse(notFound.body)).toEqual({ errors: ['not_found'] });
    const many = Object.fromEntries(Array.from({ length: 150 }, (_v, i) => [`x-h${i}`, 'v']));
    const tooMany = await refusal(open(wsUrl(), { authorization: `Bearer ${GOOD_TOKEN}`, ...many }));
    expect(tooMany.status).toBe(431);
    const noHost = await rawExchange(h.gateway.port, 'GET /ws HTTP/1.1\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
    expect(noHost).toMatch(/^HTTP\/1\.1 400 /);
    expect(a.upgrades.length + b.upgrades.length).toBe(0);
  });

  it('answers CORS preflights without a token, for the REST and the host API paths', async () => {
    const preflight = (path: string, origin = 'https://app.example') =>
      fetch(`${h.url}${path}`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });
    for (const path of ['/api/v1/channels/general/messages', '/api/v1/me', '/api/host/tenants/00000000-0000-4000-8000-000000000001/jwt_secret/fetch', '/api/host/anything/else']) {
      const ok = await preflight(path);
      expect(ok.status).toBe(204);
      expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example');
      expect(ok.headers.get('access-control-allow-methods')).toContain('POST');
      expect(ok.headers.get('access-control-allow-headers')).toContain('Authorization');
      const denied = await preflight(path, 'https://evil.example');
      expect(denied.status).toBe(204);
      expect(denied.headers.get('access-control-allow-origin')).toBeNull();
    }
  });
});

describe('edge-gateway: CORS preflights without CORS_ORIGINS', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGatewayHarness();
  });
  afterAll(() => h.stop());

  it('are still answered before any token check: 204 without allow headers (the browser refuses), and nothing reaches an upstream', async () => {
    for (const path of ['/api/v1/me', '/api/host/tenants/00000000-0000-4000-8000-000000000001/messages']) {
      const res = await fetch(`${h.url}${path}`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } });
      expect(res.status, path).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
      expect(res.headers.get('www-authenticate')).toBeNull();
    }
    // An OPTIONS that is no preflight is an ordinary request: it needs a token.
    expect((await fetch(`${h.url}/api/v1/me`, { method: 'OPTIONS' })).status).toBe(401);
    expect(h.realtime.requests.length + h.registry.requests.length).toBe(0);
  });
});

describe('edge-gateway: WebSocket upstream failures', () => {
  let live: StubWsUpstream;
  let silent: Server;
  let silentPort = 0;
  const silentSockets = new Set<Socket>();
  let h: GatewayHarness | undefined;
  const wsUrl = (g: GatewayHarness) => `ws://127.0.0.1:${g.gateway.port}/ws`;

  beforeAll(async () => {
    live = await startStubWsUpstream();
    // Accepts TCP and never answers.
    silent = createServer((socket) => {
      silentSockets.add(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    silentPort = (silent.address() as { port: number }).port;
  });
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });
  afterAll(async () => {
    await live.close();
    for (const s of silentSockets) s.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('an instance that refuses connections is skipped: the upgrade goes to the next one', async () => {
    const gone = await startStubWsUpstream();
    await gone.close();
    h = await startGatewayHarness({ realtime: live, env: { REALTIME_URL: `${gone.url},${live.url}` } });
    for (let i = 0; i < 3; i++) {
      const o = await open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` });
      expect(await echo(o.ws, 'x')).toBe('echo:x');
      o.ws.terminate();
    }
  });

  it('no realtime reachable: 502 upstream_unavailable; no handshake answer in UPSTREAM_TIMEOUT_MS: 504 upstream_timeout', async () => {
    const gone = await startStubWsUpstream();
    await gone.close();
    h = await startGatewayHarness({ realtime: live, env: { REALTIME_URL: gone.url } });
    const down = await refusal(open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` }));
    expect(down.status).toBe(502);
    expect(JSON.parse(down.body)).toEqual({ errors: ['upstream_unavailable'] });
    await h.stop();
    h = await startGatewayHarness({ realtime: live, env: { REALTIME_URL: `http://127.0.0.1:${silentPort}`, UPSTREAM_TIMEOUT_MS: '300' } });
    const slow = await refusal(open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` }));
    expect(slow.status).toBe(504);
    expect(JSON.parse(slow.body)).toEqual({ errors: ['upstream_timeout'] });
  });

  it('stop() closes the WebSockets it proxies with 1001 (reconnect elsewhere at once) instead of waiting for them forever', async () => {
    h = await startGatewayHarness({ realtime: live, env: { REALTIME_URL: live.url } });
    const o = await open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` });
    const closed = new Promise<number>((resolve) => o.ws.once('close', (code) => resolve(code)));
    await h.stop();
    h = undefined;
    expect(await closed).toBe(1001);
  });

  it('stop() in the middle of a stream of frames waits for the frame in progress: every message arrives whole, then 1001', async () => {
    h = await startGatewayHarness({ realtime: live, env: { REALTIME_URL: live.url } });
    const o = await open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` });
    const server = [...live.sockets].at(-1)!;
    // Realtime keeps sending large and small messages; 512 KiB each takes several chunks on the way.
    const big = 'x'.repeat(512 * 1024);
    let sent = 0;
    const pump = setInterval(() => {
      for (let i = 0; i < 4; i++) server.send(`${sent++}:${i % 2 ? big : 'small'}`);
    }, 2);
    const received: string[] = [];
    const errors: Error[] = [];
    o.ws.on('message', (d) => received.push(String(d)));
    o.ws.on('error', (e) => errors.push(e));
    const closed = new Promise<number>((resolve) => o.ws.once('close', (code) => resolve(code)));
    // Stop once messages are flowing (bounded).
    const deadline = Date.now() + 5000;
    while (received.length < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    try {
      await h.stop();
      h = undefined;
      expect(await closed).toBe(1001);
    } finally {
      clearInterval(pump);
    }
    expect(errors, 'no corrupt frame reached the client').toEqual([]);
    expect(received.length).toBeGreaterThanOrEqual(8);
    // Whole messages, in order: each is "<n>:small" or "<n>:<512 KiB>".
    received.forEach((m, n) => {
      const [index, body] = [m.slice(0, m.indexOf(':')), m.slice(m.indexOf(':') + 1)];
      expect(Number(index)).toBe(n);
      expect(body === 'small' || body === big, `message ${n} whole`).toBe(true);
    });
  });

  it('upgraded WebSockets count against the connection guard', async () => {
    h = await startGatewayHarness({ realtime: live, env: { REALTIME_URL: live.url, MAX_CONNECTIONS_PER_ADDRESS: '2' } });
    const held = [await open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` }), await open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` })];
    const third = await refusal(open(wsUrl(h), { authorization: `Bearer ${GOOD_TOKEN}` }));
    expect(third.status).toBe(503);
    for (const o of held) o.ws.terminate();
  });
});
