import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { createLogger } from '@service-relay/core';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryMessageBus } from '../messaging/memory-message-bus';
import { createRealtimeMetrics } from '../metrics';
import { gatewayHeaders, issueToken, startRealtime, TEST_INTERNAL_TOKEN, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { createServerApiHandler, type PresenceLister } from './server-api';

describe('internal server API (the registry’s calls for the host server API)', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const tenantId = randomUUID();
  const server = { 'x-internal-token': TEST_INTERNAL_TOKEN, 'x-relay-server': '1', 'x-relay-tenant-id': tenantId };
  const publish = (body: string, headers: Record<string, string> = server) =>
    fetch(`${rt.http}/internal/server/messages`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body });

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('refuses a call without the internal token, the server marker or a tenant', async () => {
    const { 'x-relay-server': _m, ...noMarker } = server;
    const { 'x-relay-tenant-id': _t, ...noTenant } = server;
    for (const h of [{}, noMarker, noTenant, { ...server, 'x-internal-token': 'wrong-token-wrong-token-wrong-token' }, { ...server, 'x-relay-server': 'yes' }]) {
      const res = await publish('{"channels":["a"],"data":1}', h);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ errors: ['invalid_internal_token'] });
    }
  });

  it('publishes one message per channel as the server: user_id null and from "server", live and in history', async () => {
    const { token } = issueToken(verifier, { tenantId });
    const ws = await WsTestClient.connect(rt.ws, token);
    await ws.request({ type: 'subscribe', topic: topicFor(tenantId, 'a') });
    await ws.request({ type: 'subscribe', topic: topicFor(tenantId, 'b') });
    const res = await publish('{"channels":["a","b"],"data":{"n":1}}');
    expect(res.status).toBe(201);
    const { messages } = (await res.json()) as { messages: Array<Record<string, unknown>> };
    expect(messages.map((m) => [m.channel, m.user_id, m.from, m.data])).toEqual([
      ['a', null, 'server', { n: 1 }],
      ['b', null, 'server', { n: 1 }],
    ]);
    const [onA] = await ws.waitForMessages(topicFor(tenantId, 'a'), 1);
    const [onB] = await ws.waitForMessages(topicFor(tenantId, 'b'), 1);
    expect(onA).toMatchObject({ type: 'message', user_id: null, from: 'server', data: { n: 1 }, id: messages[0]!.id });
    expect(onB).toMatchObject({ user_id: null, from: 'server', id: messages[1]!.id });
    const history = (await (await fetch(`${rt.http}/api/v1/channels/a/messages`, { headers: gatewayHeaders({ ...issueToken(verifier, { tenantId }).identity }) })).json()) as { messages: Array<Record<string, unknown>> };
    expect(history.messages.at(-1)).toEqual(messages[0]);
    await ws.close();
  });

  it('leaves user messages exactly as before (no from member)', async () => {
    const { identity } = issueToken(verifier, { tenantId });
    const res = await fetch(`${rt.http}/api/v1/channels/u/messages`, { method: 'POST', headers: { ...gatewayHeaders(identity), 'content-type': 'application/json' }, body: '{"data":1}' });
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['channel', 'created_at', 'data', 'id', 'user_id']);
    expect(body.user_id).toBe(identity.userId);
  });

  it('honours an idempotency key per channel', async () => {
    const body = '{"channels":["i1","i2"],"data":1,"idempotency_key":"once"}';
    const first = (await (await publish(body)).json()) as { messages: Array<{ id: string }> };
    const again = (await (await publish(body)).json()) as { messages: Array<{ id: string }> };
    expect(again.messages.map((m) => m.id)).toEqual(first.messages.map((m) => m.id));
  });

  it('refuses bad input with the contract errors and stores nothing', async () => {
    const big = JSON.stringify({ channels: ['big'], data: 'x'.repeat(70_000) });
    const cases: Array<[string, number, string]> = [
      ['{', 400, 'invalid_body'],
      ['{"channels":["a"]}', 400, 'invalid_body'],
      ['{"channels":[],"data":1}', 400, 'invalid_body'],
      ['{"channels":["a","a"],"data":1}', 400, 'invalid_body'],
      ['{"channels":["no space"],"data":1}', 400, 'invalid_channel'],
      [big, 413, 'payload_too_large'],
    ];
    for (const [body, status, code] of cases) {
      const res = await publish(body);
      expect(res.status).toBe(status);
      expect(await res.json()).toEqual({ errors: [code] });
    }
  });

  it('data nested 65 deep (or a bad idempotency_key) is 400 invalid_body with a problem naming the rule, like every host API refusal (#29)', async () => {
    for (const body of [`{"channels":["deep"],"data":${'['.repeat(65)}${']'.repeat(65)}}`, '{"channels":["deep"],"data":1,"idempotency_key":"no spaces"}']) {
      const res = await publish(body);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ errors: ['invalid_body'], problem: expect.stringMatching(/64 arrays\/objects deep.*idempotency_key/) });
    }
    const ok = await publish(`{"channels":["deep"],"data":${'['.repeat(64)}${']'.repeat(64)}}`);
    expect(ok.status).toBe(201);
  });

  it('lists a channel’s presence members with realtime’s own presence (no channel rule applies to the server)', async () => {
    const { token, identity } = issueToken(verifier, { tenantId });
    const ws = await WsTestClient.connect(rt.ws, token);
    await ws.request({ type: 'subscribe', topic: topicFor(tenantId, 'presence:lobby'), member: { name: 'Ann' } });
    const res = await fetch(`${rt.http}/internal/server/channels/presence%3Alobby/presence`, { headers: server });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ channel: 'presence:lobby', members: [{ user_id: identity.userId, data: { name: 'Ann' } }] });
    // A channel without presence has no members to list.
    expect(await (await fetch(`${rt.http}/internal/server/channels/plain/presence`, { headers: server })).json()).toEqual({ channel: 'plain', members: [] });
    await ws.close();
  });
});

describe('internal server API: presence listing', () => {
  const NEXT_TOKEN = 'next-internal-token-next-internal-token-0123';
  let http: Server;
  let url = '';
  const asked: Array<{ tenantId: string; channel: string }> = [];
  const lister: PresenceLister = async (ref) => {
    asked.push(ref);
    return [{ user_id: 'u1', data: { s: 'here' } }, { user_id: 'u2' }];
  };
  const tenantId = randomUUID();
  const headers = { 'x-internal-token': TEST_INTERNAL_TOKEN, 'x-relay-server': '1', 'x-relay-tenant-id': tenantId };

  beforeAll(async () => {
    const handler = createServerApiHandler({
      // Mid-rotation: INTERNAL_TOKEN and INTERNAL_TOKEN_NEXT both accepted.
      acceptedInternalTokens: [TEST_INTERNAL_TOKEN, NEXT_TOKEN],
      messages: new MemoryMessageBus({ maxMessages: 10, ttlS: 60 }),
      metrics: createRealtimeMetrics(),
      logger: createLogger({ service: 'test', level: 'silent' }),
      acceptingPublishes: () => true,
      presence: lister,
    });
    http = createServer(handler);
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => http.close(resolve));
  });

  it('lists the members of the decoded channel of the calling tenant', async () => {
    const res = await fetch(`${url}/internal/server/channels/room%3A1/presence`, { headers });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ channel: 'room:1', members: [{ user_id: 'u1', data: { s: 'here' } }, { user_id: 'u2' }] });
    expect(asked).toEqual([{ tenantId, channel: 'room:1' }]);
  });

  it('accepts INTERNAL_TOKEN_NEXT beside INTERNAL_TOKEN during a rotation, and nothing else', async () => {
    const path = `${url}/internal/server/channels/room%3A1/presence`;
    expect((await fetch(path, { headers: { ...headers, 'x-internal-token': NEXT_TOKEN } })).status).toBe(200);
    const wrong = await fetch(path, { headers: { ...headers, 'x-internal-token': `${NEXT_TOKEN}x` } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ errors: ['invalid_internal_token'] });
  });

  it('refuses a bad channel (400) and a wrong method (405)', async () => {
    expect((await fetch(`${url}/internal/server/channels/a%20b/presence`, { headers })).status).toBe(400);
    expect((await fetch(`${url}/internal/server/channels/a/presence`, { method: 'POST', headers })).status).toBe(405);
  });
});
