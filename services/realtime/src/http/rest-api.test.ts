import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeVerifier } from '@service-relay/testkit';
import { gatewayHeaders, issueToken, startRealtime, TEST_INTERNAL_TOKEN, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';

describe('REST side (behind the gateway)', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const { identity } = issueToken(verifier);
  const headers = gatewayHeaders(identity);
  const api = (path: string, init: RequestInit = {}) => fetch(`${rt.http}${path}`, { ...init, headers: { ...headers, ...(init.headers as Record<string, string>) } });
  const post = (path: string, body: string) => api(path, { method: 'POST', body, headers: { 'content-type': 'application/json' } });

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('refuses any request without the internal token or identity headers', async () => {
    const { 'x-internal-token': _t, ...noToken } = headers;
    const { 'x-relay-tenant-id': _i, ...noTenant } = headers;
    for (const h of [{}, noToken, { ...headers, 'x-internal-token': 'wrong-token-wrong-token-wrong-token' }, noTenant, { ...headers, 'x-relay-tenant-id': 'nope' }]) {
      for (const path of ['/api/v1/me', '/api/v1/channels/a/messages', '/api/v1/unknown']) {
        const res = await fetch(`${rt.http}${path}`, { headers: h });
        expect(res.status).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('Bearer realm="service-relay", error="invalid_token"');
        expect(await res.text()).toBe('{"errors":["invalid_or_missing_token"]}');
      }
    }
  });

  it('answers /me with the identity the gateway passed', async () => {
    const res = await api('/api/v1/me');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ tenant_id: identity.tenantId, user_id: identity.userId, expires_at: identity.expiresAt });
  });

  it('publishes to WebSocket subscribers and serves history oldest first', async () => {
    const { token } = issueToken(verifier, { tenantId: identity.tenantId });
    const ws = await WsTestClient.connect(rt.ws, token);
    const topic = topicFor(identity.tenantId, 'news');
    await ws.request({ type: 'subscribe', topic });
    const created = [];
    for (let i = 0; i < 4; i++) {
      const res = await post('/api/v1/channels/news/messages', JSON.stringify({ data: { i } }));
      expect(res.status).toBe(201);
      created.push((await res.json()) as { id: string });
    }
    expect(created[0]).toEqual({ id: expect.any(String), channel: 'news', user_id: identity.userId, data: { i: 0 }, created_at: expect.any(String) });
    expect((await ws.waitForMessages(topic, 4)).map((m) => m.id)).toEqual(created.map((m) => m.id));
    await ws.close();

    const latest = (await (await api('/api/v1/channels/news/messages?limit=2')).json()) as { messages: { id: string }[] };
    expect(latest.messages.map((m) => m.id)).toEqual(created.slice(2).map((m) => m.id));
    const after = (await (await api(`/api/v1/channels/news/messages?after=${created[0]!.id}&limit=2`)).json()) as { messages: { id: string }[] };
    expect(after.messages.map((m) => m.id)).toEqual(created.slice(1, 3).map((m) => m.id));
    expect(await (await api('/api/v1/channels/empty/messages')).json()).toEqual({ messages: [], epoch: '' });
  });

  it('answers history with the epoch, and with `after` whether recovery is complete', async () => {
    const recoveryCounts = async () => {
      const text = await (await fetch(`${rt.ops}/metrics`)).text();
      const counts: Record<string, number> = {};
      for (const m of text.matchAll(/relay_realtime_recoveries_total\{[^}]*source="rest",result="(\w+)"[^}]*\} (\d+)/g)) counts[m[1]!] = Number(m[2]);
      return counts;
    };
    const before = await recoveryCounts();
    const get = async (query: string) => (await (await api(`/api/v1/channels/recover/messages?${query}`)).json()) as Record<string, unknown>;
    const m1 = (await (await post('/api/v1/channels/recover/messages', '{"data":1}')).json()) as { id: string };
    await post('/api/v1/channels/recover/messages', '{"data":2}');
    const latest = await get('limit=1');
    expect(latest).toEqual({ messages: [expect.objectContaining({ data: 2 })], epoch: expect.stringMatching(/^[0-9a-f]{32}$/) });
    const epoch = latest.epoch as string;
    expect(await get(`after=${m1.id}`)).toMatchObject({ epoch, recovered: true });
    expect(await get(`after=${m1.id}&epoch=${epoch}`)).toMatchObject({ epoch, recovered: true });
    expect(await get(`after=${m1.id}&epoch=other`)).toEqual({ messages: [expect.objectContaining({ data: 2 })], epoch, recovered: false, reason: 'history_lost' });
    expect(await get(`after=${Number(m1.id.split('-')[0]) - 90_000_000}-0`)).toMatchObject({ recovered: false, reason: 'too_old' });
    const missing = (await (await api(`/api/v1/channels/nothing-here/messages?after=${m1.id}`)).json()) as Record<string, unknown>;
    expect(missing).toEqual({ messages: [], epoch: '', recovered: false, reason: 'history_lost' });
    const bad = await api(`/api/v1/channels/recover/messages?after=${m1.id}&epoch=has%20space`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ errors: ['invalid_query'] });
    // An operator sees the losses too, not only the client.
    const after = await recoveryCounts();
    expect(['recovered', 'history_lost', 'too_old'].map((r) => (after[r] ?? 0) - (before[r] ?? 0))).toEqual([2, 2, 1]);
  });

  it('stores one message per Idempotency-Key and answers a retry with the original', async () => {
    const send = (body: string, key?: string) =>
      api('/api/v1/channels/idem/messages', { method: 'POST', body, headers: { 'content-type': 'application/json', ...(key !== undefined && { 'idempotency-key': key }) } });
    const first = await send('{"data":{"n":1}}', 'pay:42');
    expect(first.status).toBe(201);
    const original = await first.json();
    const retry = await send('{"data":{"n":1}}', 'pay:42');
    expect(retry.status).toBe(201);
    expect(await retry.json()).toEqual(original);
    const history = (await (await api('/api/v1/channels/idem/messages')).json()) as { messages: unknown[] };
    expect(history.messages).toEqual([original]);
    for (const key of ['has space', 'k'.repeat(129), 'ünïcode']) {
      const res = await send('{"data":1}', key);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ errors: ['invalid_body'] });
    }
  });

  it('answers data nested deeper than 64 levels with 400 invalid_body, not a 500', async () => {
    const res = await post('/api/v1/channels/deep/messages', `{"data":${'['.repeat(5000)}${']'.repeat(5000)}}`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ errors: ['invalid_body'] });
    expect((await post('/api/v1/channels/deep/messages', `{"data":${'{"a":'.repeat(64)}1${'}'.repeat(64)}}`)).status).toBe(201);
    expect((await post('/api/v1/channels/deep/messages', `{"data":${'{"a":'.repeat(65)}1${'}'.repeat(65)}}`)).status).toBe(400);
  });

  it('answers the contract errors for bad channels, bodies, sizes, queries and paths', async () => {
    const expectError = async (res: Response, status: number, code: string) => {
      expect(res.status).toBe(status);
      expect(await res.json()).toEqual({ errors: [code] });
    };
    await expectError(await post('/api/v1/channels/bad%20name/messages', '{"data":1}'), 400, 'invalid_channel');
    await expectError(await post(`/api/v1/channels/${'x'.repeat(129)}/messages`, '{"data":1}'), 400, 'invalid_channel');
    await expectError(await post('/api/v1/channels/ok/messages', '{"data":'), 400, 'invalid_body');
    await expectError(await post('/api/v1/channels/ok/messages', '{"other":1}'), 400, 'invalid_body');
    await expectError(await post('/api/v1/channels/ok/messages', '[1]'), 400, 'invalid_body');
    await expectError(await post('/api/v1/channels/ok/messages', JSON.stringify({ data: 'x'.repeat(65_536) })), 413, 'payload_too_large');
    expect((await post('/api/v1/channels/ok/messages', JSON.stringify({ data: 'x'.repeat(65_534) }))).status).toBe(201);
    expect((await post('/api/v1/channels/ok/messages', '{"data":null}')).status).toBe(201);
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'after=nope', 'after=1']) {
      await expectError(await api(`/api/v1/channels/ok/messages?${q}`), 400, 'invalid_query');
    }
    await expectError(await api('/api/v1/unknown'), 404, 'not_found');
    await expectError(await fetch(`${rt.http}/elsewhere`), 404, 'not_found');
    await expectError(await api('/api/v1/channels/ok/messages', { method: 'DELETE' }), 405, 'method_not_allowed');
  });

  it('every 405 carries Allow with the methods the path takes (PROTOCOL.md, #29)', async () => {
    for (const [path, method, allow] of [
      ['/api/v1/channels/ok/messages', 'DELETE', 'GET, HEAD, POST'],
      ['/api/v1/channels/ok/messages', 'PUT', 'GET, HEAD, POST'],
      ['/api/v1/me', 'POST', 'GET, HEAD'],
      ['/api/v1/channels/ok/presence', 'DELETE', 'GET, HEAD'],
    ] as const) {
      const res = await api(path, { method });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get('allow'), `${method} ${path}`).toBe(allow);
      expect(await res.json()).toEqual({ errors: ['method_not_allowed'] });
    }
  });

  it('serves health, readiness and metrics on its ops port', async () => {
    expect((await fetch(`${rt.ops}/healthz`)).status).toBe(200);
    const ready = await fetch(`${rt.ops}/readyz`);
    expect(await ready.json()).toMatchObject({ status: 'ready', checks: { verifier: true, messages: true, tenant_events: true, tenant_feed: true } });
    const metrics = await (await fetch(`${rt.ops}/metrics`)).text();
    for (const name of ['relay_realtime_connections', 'relay_realtime_messages_in_total', 'relay_realtime_fanout_latency_seconds', 'relay_realtime_closes_total']) {
      expect(metrics).toContain(name);
    }
  });

  it('answers /readyz and /metrics 404 on its public port, with or without the internal token, and keeps /healthz there; the ops port serves nothing else', async () => {
    expect((await fetch(`${rt.http}/healthz`)).status).toBe(200);
    for (const path of ['/readyz', '/metrics', '/readyz?verbose=1']) {
      for (const headers of [{}, { 'x-internal-token': TEST_INTERNAL_TOKEN }] as Record<string, string>[]) {
        const res = await fetch(`${rt.http}${path}`, { headers });
        expect(res.status, path).toBe(404);
        expect(await res.json()).toEqual({ errors: ['not_found'] });
      }
    }
    for (const path of ['/api/v1/me', '/ws', '/internal/live']) expect((await fetch(`${rt.ops}${path}`)).status, path).toBe(404);
  });
});
