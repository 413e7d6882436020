import type { ServerResponse } from 'node:http';
import { MAX_API_BODY_BYTES } from '@service-relay/edge';
import { fakeIdentity } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';
import { streamUpload } from '../testing/raw-request';
import { echoHandler, startStubUpstream } from '../testing/stub-upstream';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('edge-gateway: forwarding, limits and errors', () => {
  let h: GatewayHarness;
  const held: ServerResponse[] = [];
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { UPSTREAM_TIMEOUT_MS: '1000', CORS_ORIGINS: 'https://app.example' } });
    h.verifier.allow('tok', fakeIdentity());
  });
  afterAll(async () => {
    for (const r of held) r.end();
    await h.stop();
  });
  const auth = { authorization: 'Bearer tok' };

  it('forwards the body, a chunked one as one sized body', async () => {
    const data = JSON.stringify({ data: { hello: 'world' } });
    const res = await fetch(`${h.url}/api/v1/channels/c1/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: data });
    expect(res.status).toBe(200);
    const seen = h.realtime.requests.at(-1)!;
    expect(seen.method).toBe('POST');
    expect(seen.body.toString()).toBe(data);

    const ok = await streamUpload(`${h.url}/api/v1/channels/c1/messages`, 64 * 1024, { headers: auth });
    expect(ok.status).toBe(200);
    expect(h.realtime.requests.at(-1)!.headers['content-length']).toBe(String(64 * 1024));
    expect(h.realtime.requests.at(-1)!.headers['transfer-encoding']).toBeUndefined();
  });

  it('refuses a declared oversize body at once, before reading it or checking the token', async () => {
    const res = await streamUpload(`${h.url}/api/v1/channels/c1/messages`, 50 * 1024 * 1024, { contentLength: true });
    expect(res.status).toBe(413);
    expect(res.body).toBe('{"errors":["payload_too_large"]}');
    // The limit a client can act on: 64 KiB of `data` (docs/API.md "Limits").
    expect(res.headers['x-relay-limit']).toBe('65536');
    expect(res.sent).toBe(0);
  });

  it('cuts a 50 MB chunked body at the limit without memory growing by its size', async () => {
    const count = h.realtime.requests.length;
    const base = process.memoryUsage();
    let peakRss = base.rss;
    let peakBuffers = base.arrayBuffers;
    const sampler = setInterval(() => {
      const m = process.memoryUsage();
      peakRss = Math.max(peakRss, m.rss);
      peakBuffers = Math.max(peakBuffers, m.arrayBuffers);
    }, 1);
    const res = await streamUpload(`${h.url}/api/v1/channels/c1/messages`, 50 * 1024 * 1024, { headers: auth });
    clearInterval(sampler);
    expect(res.status).toBe(413);
    expect(res.body).toBe('{"errors":["payload_too_large"]}');
    expect(res.headers['x-relay-limit']).toBe('65536');
    // The gateway stopped reading near the limit and closed; the client could not send it all.
    expect(res.sent).toBeLessThan(50 * 1024 * 1024);
    expect(peakBuffers - base.arrayBuffers).toBeLessThan(10 * 1024 * 1024);
    expect(peakRss - base.rss).toBeLessThan(20 * 1024 * 1024);
    expect(h.realtime.requests.length).toBe(count);
    expect(MAX_API_BODY_BYTES).toBe(65_536 + 4096);
  });

  it('answers 504 upstream_timeout when the upstream does not answer in time', async () => {
    h.realtime.handler = (_req, res) => void held.push(res);
    const res = await fetch(`${h.url}/api/v1/me`, { headers: auth });
    h.realtime.handler = echoHandler;
    expect(res.status).toBe(504);
    expect(await res.text()).toBe('{"errors":["upstream_timeout"]}');
  });

  it('abandons the upstream request when the client goes away before the answer', async () => {
    // A long upstream timeout: only the client's leaving can end the upstream request here.
    const g = await startGatewayHarness({ verifier: h.verifier, registry: h.registry, realtime: h.realtime, env: { UPSTREAM_TIMEOUT_MS: '60000' } });
    let reached!: () => void;
    const arrived = new Promise<void>((resolve) => (reached = resolve));
    let upstreamClosed!: (finished: boolean) => void;
    const closed = new Promise<boolean>((resolve) => (upstreamClosed = resolve));
    h.realtime.handler = (_req, res) => {
      res.once('close', () => upstreamClosed(res.writableFinished));
      reached();
    };
    try {
      const client = new AbortController();
      const answer = fetch(`${g.url}/api/v1/me`, { headers: auth, signal: client.signal }).then(
        () => 'answered',
        () => 'aborted',
      );
      await arrived;
      client.abort();
      expect(await answer).toBe('aborted');
      // The upstream saw its request's connection go, its answer never finished.
      expect(await closed).toBe(false);
    } finally {
      h.realtime.handler = echoHandler;
      await g.stop();
    }
  });

  it('answers 502 upstream_unavailable when the upstream refuses connections', async () => {
    const gone = await startStubUpstream();
    await gone.close();
    const g = await startGatewayHarness({ verifier: h.verifier, registry: h.registry, env: { REALTIME_URL: gone.url } });
    try {
      const res = await fetch(`${g.url}/api/v1/me`, { headers: auth });
      expect(res.status).toBe(502);
      expect(await res.text()).toBe('{"errors":["upstream_unavailable"]}');
      const ready = await fetch(`${g.opsUrl}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ checks: { verifier: true, registry: true, realtime: false } });
    } finally {
      await g.stop();
    }
  });

  it('sends a request refused by one realtime instance to the next one (a stopping instance loses nothing)', async () => {
    const gone = await startStubUpstream();
    await gone.close();
    const g = await startGatewayHarness({ verifier: h.verifier, registry: h.registry, realtime: h.realtime, env: { REALTIME_URL: `${gone.url},${h.realtime.url}` } });
    try {
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${g.url}/api/v1/channels/c1/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"data":1}' });
        expect(res.status).toBe(200);
      }
    } finally {
      await g.stop();
    }
  });

  it('sends a host-sync call refused by one registry replica to the next one, and stays ready while one replica answers', async () => {
    const gone = await startStubUpstream();
    await gone.close();
    const g = await startGatewayHarness({ verifier: h.verifier, registry: h.registry, realtime: h.realtime, env: { REGISTRY_URL: `${gone.url},${h.registry.url}` } });
    try {
      const before = h.registry.requests.length;
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${g.url}/api/host/tenants/t1/jwt_secret/fetch`, { method: 'POST', headers: { authorization: 'Basic eDp5' } });
        expect(res.status).toBe(200);
      }
      expect(h.registry.requests.length - before).toBe(4);
      const ready = await fetch(`${g.opsUrl}/readyz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ checks: { registry: true } });
    } finally {
      await g.stop();
    }
  });

  it('sends a request again, once, when its kept-alive upstream connection resets under it: GET, or with an Idempotency-Key; never another POST', async () => {
    let reset = 0;
    h.realtime.handler = (req, res) => {
      if (reset > 0) {
        reset--;
        res.socket?.destroy();
        return;
      }
      echoHandler(req, res);
    };
    const post = (headers: Record<string, string> = {}) => fetch(`${h.url}/api/v1/channels/c1/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', ...headers }, body: '{"data":1}' });
    try {
      // Each round starts with a kept-alive connection to realtime, which the next request reuses.
      expect((await fetch(`${h.url}/api/v1/me`, { headers: auth })).status).toBe(200);
      reset = 1;
      expect((await fetch(`${h.url}/api/v1/me`, { headers: auth })).status).toBe(200);
      expect((await post({ 'idempotency-key': 'k-1' })).status).toBe(200);
      reset = 1;
      expect((await post({ 'idempotency-key': 'k-2' })).status).toBe(200);
      expect((await fetch(`${h.url}/api/v1/me`, { headers: auth })).status).toBe(200);
      reset = 1;
      const plain = await post();
      expect(plain.status).toBe(502);
      expect(await plain.text()).toBe('{"errors":["upstream_unavailable"]}');
      // Once only: a second reset is answered.
      expect((await fetch(`${h.url}/api/v1/me`, { headers: auth })).status).toBe(200);
      reset = 2;
      expect((await fetch(`${h.url}/api/v1/me`, { headers: auth })).status).toBe(502);
    } finally {
      h.realtime.handler = echoHandler;
    }
  });

  it('sends a host-sync fetch again, once, when the registry resets it (a replica dying mid-request): it only reads', async () => {
    let reset = 0;
    const original = h.registry.handler;
    h.registry.handler = (req, res) => {
      if (reset > 0) {
        reset--;
        res.socket?.destroy();
        return;
      }
      original(req, res);
    };
    const fetchSecret = () => fetch(`${h.url}/api/host/tenants/t1/jwt_secret/fetch`, { method: 'POST', headers: { authorization: 'Basic aDpz' } });
    try {
      reset = 1;
      const first = await fetchSecret();
      expect(first.status).not.toBe(502);
      reset = 2;
      expect((await fetchSecret()).status).toBe(502);
    } finally {
      h.registry.handler = original;
    }
  });

  it('answers 404 not_found for unknown paths, 405 for a GET on the fetch path', async () => {
    for (const path of ['/', '/api/v2/me', '/api/host/tenants', '/api/host/tenants/x']) {
      const res = await fetch(`${h.url}${path}`);
      expect(res.status, path).toBe(404);
      expect(await res.text()).toBe('{"errors":["not_found"]}');
    }
    // Any other path under a tenant is the host server API's (#13): the registry judges it.
    await fetch(`${h.url}/api/host/tenants/x/other`);
    expect(h.registry.requests.at(-1)!.url).toBe('/api/host/tenants/x/other');
    const res = await fetch(`${h.url}/api/host/tenants/x/jwt_secret/fetch`);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('keeps a plain X-Request-Id and replaces an unsafe one, on every response', async () => {
    expect((await fetch(`${h.url}/nope`, { headers: { 'x-request-id': 'abc-1.2:3_4' } })).headers.get('x-request-id')).toBe('abc-1.2:3_4');
    for (const bad of ['has space', 'x'.repeat(200), 'quote"']) {
      const res = await fetch(`${h.url}/api/v1/me`, { headers: { 'x-request-id': bad } });
      expect(res.status).toBe(401);
      expect(res.headers.get('x-request-id')).toMatch(UUID);
    }
  });

  it('answers CORS preflights for configured origins only', async () => {
    const preflight = (origin: string) =>
      fetch(`${h.url}/api/v1/me`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } });
    const ok = await preflight('https://app.example');
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(ok.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(ok.headers.get('access-control-allow-methods')).toMatch(/POST/);
    const denied = await preflight('https://evil.example');
    expect(denied.headers.get('access-control-allow-origin')).toBeNull();
    const simple = await fetch(`${h.url}/api/v1/me`, { headers: { ...auth, origin: 'https://app.example' } });
    expect(simple.status).toBe(200);
    expect(simple.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(simple.headers.get('access-control-expose-headers')).toMatch(/X-Request-Id/);
    expect(simple.headers.get('access-control-expose-headers')).toMatch(/X-Relay-Limit/);
  });

  it('serves /healthz, /readyz and /metrics on its ops port', async () => {
    expect((await fetch(`${h.opsUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${h.opsUrl}/readyz`);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { verifier: true, registry: true, realtime: true } });
    const text = await (await fetch(`${h.opsUrl}/metrics`)).text();
    expect(text).toMatch(/gateway_http_requests_total\{route="api_v1",status="200"/);
    expect(text).toMatch(/gateway_http_requests_total\{route="api_v1",status="413"/);
    // The request-latency objective's histogram counts the same answers, by route.
    expect(text).toMatch(/gateway_http_request_duration_seconds_count\{[^}]*route="api_v1"[^}]*\} [1-9]/);
    expect(text).toMatch(/gateway_http_request_duration_seconds_bucket\{[^}]*le="0.25"[^}]*route="api_v1"|gateway_http_request_duration_seconds_bucket\{[^}]*route="api_v1"[^}]*le="0.25"/);
    expect(text).toMatch(/gateway_auth_cache_hits_total\{[^}]*\} [1-9]/);
    expect(text).toMatch(/gateway_auth_cache_misses_total/);
    expect(text).toMatch(/gateway_auth_verify_seconds_bucket\{[^}]*outcome="valid"/);
  });

  it('answers /readyz and /metrics 404 on its public port (a client must not read them) and keeps /healthz there for load balancers', async () => {
    expect(await (await fetch(`${h.url}/healthz`)).json()).toEqual({ status: 'ok' });
    for (const path of ['/readyz', '/metrics', '/metrics?x=1']) {
      for (const method of ['GET', 'HEAD']) {
        const res = await fetch(`${h.url}${path}`, { method, headers: auth });
        expect(res.status, `${method} ${path}`).toBe(404);
        if (method === 'GET') expect(await res.json()).toEqual({ errors: ['not_found'] });
      }
    }
    // Nothing of the public surface is on the ops port.
    for (const path of ['/api/v1/me', '/api/host/tenants/t1/jwt_secret/fetch', '/ws']) expect((await fetch(`${h.opsUrl}${path}`, { headers: auth })).status, path).toBe(404);
  });
});
