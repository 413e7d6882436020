import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { clientConstructor, internalMetadata, REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE, type GetTenantKeysResponse } from '@service-relay/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

interface Created {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const FAILURE_BODY = '{"errors":["invalid_host_sync_credentials"]}';
const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';
const USER = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';
const RATE_LIMIT = 20;

interface KeysClient extends grpc.Client {
  GetTenantKeys(req: { tenant_id: string }, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: GetTenantKeysResponse) => void): void;
}

/** A stand-in for realtime's internal side: records every call and answers what the test set. */
let fakeRealtime: Server;
const seen: Seen[] = [];
let nextAnswer: { status: number; body: string } = { status: 201, body: '{"messages":[]}' };

let reg: TestRegistry;
let tenant: Created;
let other: Created;
/** A tenant with one webhook endpoint wanting member_added. */
let hooked: Created;

beforeAll(async () => {
  fakeRealtime = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(nextAnswer.status, { 'content-type': 'application/json' });
      res.end(nextAnswer.body);
    });
  });
  await new Promise<void>((resolve) => fakeRealtime.listen(0, '127.0.0.1', resolve));
  const port = (fakeRealtime.address() as AddressInfo).port;
  reg = await startTestRegistry({ env: { REALTIME_URL: `http://127.0.0.1:${port}`, HOST_FETCH_RATE_LIMIT: String(RATE_LIMIT), PROPAGATION_TIMEOUT_MS: '1500' } });
  tenant = await create();
  other = await create();
  // Before any test leaves a consumer behind (the webhooks test below needs this first change confirmed).
  hooked = await create();
  const first = await host('POST', hooked.tenant_id, 'webhooks', { authorization: basic(hooked), body: JSON.stringify({ url: 'https://example.com/hook', events: ['member_added'] }) });
  if (first.status !== 201) throw new Error(`webhook endpoint not created: ${first.status}`);
});
afterAll(async () => {
  await reg?.stop();
  await new Promise((resolve) => fakeRealtime?.close(resolve));
});

async function create(): Promise<Created> {
  return (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
}

function basic(t: Created): string {
  return `Basic ${Buffer.from(`${t.host_sync_client_id}:${t.host_sync_client_secret}`).toString('base64')}`;
}

function host(method: string, tenantId: string, path: string, init: { authorization?: string; body?: string } = {}): Promise<Response> {
  return fetch(`${reg.baseUrl}/api/host/tenants/${tenantId}/${path}`, {
    method,
    headers: { ...(init.authorization !== undefined && { authorization: init.authorization }), ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: init.body }),
  });
}

/** A port nothing listens on (bound, then released): connecting to it is refused. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** The tenant's state version as its last feed change carried it. */
function lastVersion(tenantId: string): number {
  return reg.events.filter((e) => e.tenant_id === tenantId).at(-1)!.version;
}

/** Status, body and every header that is not per-connection, exactly. */
async function snapshot(res: Response) {
  const headers = [...res.headers.entries()].filter(([k]) => !['date', 'connection', 'keep-alive', 'x-request-id'].includes(k));
  return { status: res.status, headers, body: await res.text() };
}

const ROUTES: Array<[method: string, path: string, body?: string]> = [
  ['POST', 'messages', '{"channels":["a"],"data":1}'],
  ['GET', 'channels/room/presence'],
  ['POST', `users/${USER}/disconnect`],
  ['POST', `users/${USER}/revoke_tokens`, '{}'],
];

describe('host server API: authentication', () => {
  it.each(ROUTES)('%s %s answers the fetch’s exact 401 for every failure, and calls nothing', async (method, path, body) => {
    const expected = await snapshot(await fetch(`${reg.baseUrl}/api/host/tenants/${UNKNOWN_ID}/jwt_secret/fetch`, { method: 'POST' }));
    expect(expected.body).toBe(FAILURE_BODY);
    const calls = seen.length;
    const events = reg.events.length;
    const wrongSecret = `Basic ${Buffer.from(`${tenant.host_sync_client_id}:${other.host_sync_client_secret}`).toString('base64')}`;
    const cases: Array<[string, string | undefined]> = [
      [tenant.tenant_id, undefined],
      [tenant.tenant_id, wrongSecret],
      [tenant.tenant_id, basic(other)],
      [UNKNOWN_ID, basic(tenant)],
      ['not-a-uuid', basic(tenant)],
      [tenant.tenant_id.toUpperCase(), basic(tenant)],
      [tenant.tenant_id, 'Bearer abc'],
    ];
    for (const [id, authorization] of cases) {
      const res = await host(method, id, path, { ...(authorization !== undefined && { authorization }), ...(body !== undefined && { body }) });
      expect(await snapshot(res)).toEqual(expected);
    }
    expect(seen.length).toBe(calls);
    expect(reg.events.length).toBe(events);
  });

  it('counts failures toward the fetch’s rate limit (one budget per address and tenant id)', async () => {
    const id = '0d3c6b1a-5e4f-4a2b-9c8d-7e6f5a4b3c2d';
    for (let i = 0; i < RATE_LIMIT; i++) expect((await host('POST', id, 'messages', { authorization: basic(tenant), body: '{}' })).status).toBe(401);
    const fetchRes = await fetch(`${reg.baseUrl}/api/host/tenants/${id}/jwt_secret/fetch`, { method: 'POST' });
    expect(fetchRes.status).toBe(429);
    expect(await fetchRes.json()).toEqual({ errors: ['rate_limited'] });
    expect((await host('GET', id, 'channels/a/presence', { authorization: basic(tenant) })).status).toBe(429);
  });

  it('answers a wrong method 405 with Allow, before any credential check', async () => {
    const res = await host('GET', tenant.tenant_id, 'messages');
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect((await host('POST', tenant.tenant_id, 'channels/a/presence')).headers.get('allow')).toBe('GET');
  });

  it('answers an unknown host path 404', async () => {
    expect((await host('POST', tenant.tenant_id, 'users/x/delete', { authorization: basic(tenant) })).status).toBe(404);
  });
});

describe('host server API: publish', () => {
  it('makes one call to realtime as the server of the authenticated tenant and answers what realtime answered', async () => {
    const messages = [{ id: '1-0', channel: 'a', user_id: null, from: 'server', data: { n: 1 }, created_at: '2026-01-01T00:00:00.000Z' }];
    nextAnswer = { status: 201, body: JSON.stringify({ messages }) };
    const before = seen.length;
    const res = await host('POST', tenant.tenant_id, 'messages', { authorization: basic(tenant), body: '{"channels":["a","b.c"],"data":{"n":1},"idempotency_key":"k-1"}' });
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ messages });
    expect(seen.length).toBe(before + 1);
    const call = seen.at(-1)!;
    expect(call.method).toBe('POST');
    expect(call.url).toBe('/internal/server/messages');
    expect(call.headers['x-internal-token']).toBe(reg.internalToken);
    expect(call.headers['x-relay-server']).toBe('1');
    expect(call.headers['x-relay-tenant-id']).toBe(tenant.tenant_id);
    expect(JSON.parse(call.body)).toEqual({ channels: ['a', 'b.c'], data: { n: 1 }, idempotency_key: 'k-1' });
  });

  it('passes realtime’s contract refusals on (413 for oversized data)', async () => {
    nextAnswer = { status: 413, body: '{"errors":["payload_too_large"]}' };
    const res = await host('POST', tenant.tenant_id, 'messages', { authorization: basic(tenant), body: '{"channels":["a"],"data":"x"}' });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ errors: ['payload_too_large'] });
  });

  const many = JSON.stringify({ channels: Array.from({ length: 101 }, (_, i) => `c${i}`), data: 1 });
  const bad: Array<[string, string, string, RegExp]> = [
    ['not JSON', '{', 'invalid_body', /not valid JSON/],
    ['not an object', '[1]', 'invalid_body', /JSON object/],
    ['no data', '{"channels":["a"]}', 'invalid_body', /data is required/],
    ['no channels', '{"data":1}', 'invalid_body', /1 to 100 channel names/],
    ['empty channels', '{"channels":[],"data":1}', 'invalid_body', /1 to 100 channel names/],
    ['101 channels', many, 'invalid_body', /1 to 100 channel names/],
    ['a bad channel name', '{"channels":["a","no spaces"],"data":1}', 'invalid_channel', /1 to 128 characters/],
    ['a channel that is not a string', '{"channels":[1],"data":1}', 'invalid_channel', /1 to 128 characters/],
    ['a channel named twice', '{"channels":["a","a"],"data":1}', 'invalid_body', /distinct/],
    ['an unknown member', '{"channels":["a"],"data":1,"user_id":"x"}', 'invalid_body', /allowed: channels, data, idempotency_key/],
    ['a bad idempotency key', '{"channels":["a"],"data":1,"idempotency_key":"has space"}', 'invalid_body', /1 to 128 characters/],
  ];
  it.each(bad)('refuses %s with the contract error naming what is allowed, calling nothing', async (_name, body, code, problem) => {
    const before = seen.length;
    const res = await host('POST', tenant.tenant_id, 'messages', { authorization: basic(tenant), body });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as { errors: string[]; problem: string };
    expect(answer.errors).toEqual([code]);
    expect(answer.problem).toMatch(problem);
    expect(seen.length).toBe(before);
  });

  it('takes the REALTIME_URL list in turn, skipping an instance that refuses the connection', async () => {
    const port = (fakeRealtime.address() as AddressInfo).port;
    const closed = await closedPort();
    const two = await startTestRegistry({ env: { REALTIME_URL: `http://127.0.0.1:${closed}, http://127.0.0.1:${port}/` } });
    try {
      expect(two.config.realtimeUrls).toEqual([`http://127.0.0.1:${closed}`, `http://127.0.0.1:${port}`]);
      const t = (await (await two.admin('POST', '/admin/tenants')).json()) as Created;
      nextAnswer = { status: 201, body: '{"messages":[]}' };
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${two.baseUrl}/api/host/tenants/${t.tenant_id}/messages`, { method: 'POST', headers: { authorization: basic(t) }, body: '{"channels":["a"],"data":1}' });
        expect(res.status).toBe(201);
      }
    } finally {
      await two.stop();
    }
  });

  it('answers 503 unavailable when realtime cannot be reached', async () => {
    const down = await startTestRegistry({ env: { REALTIME_URL: `http://127.0.0.1:${await closedPort()}` } });
    try {
      const t = (await (await down.admin('POST', '/admin/tenants')).json()) as Created;
      const res = await fetch(`${down.baseUrl}/api/host/tenants/${t.tenant_id}/messages`, { method: 'POST', headers: { authorization: basic(t) }, body: '{"channels":["a"],"data":1}' });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ errors: ['unavailable'] });
    } finally {
      await down.stop();
    }
  });
});

describe('host server API: presence', () => {
  it('asks realtime for the decoded channel and answers its listing', async () => {
    nextAnswer = { status: 200, body: '{"channel":"room:1","members":[{"user_id":"u1","data":{"a":1}}]}' };
    const res = await host('GET', tenant.tenant_id, 'channels/room%3A1/presence', { authorization: basic(tenant) });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ channel: 'room:1', members: [{ user_id: 'u1', data: { a: 1 } }] });
    const call = seen.at(-1)!;
    expect(call.method).toBe('GET');
    expect(call.url).toBe('/internal/server/channels/room%3A1/presence');
    expect(call.headers['x-relay-tenant-id']).toBe(tenant.tenant_id);
  });

  it('refuses a bad channel name with 400 invalid_channel', async () => {
    const res = await host('GET', tenant.tenant_id, 'channels/a%20b/presence', { authorization: basic(tenant) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { errors: string[] }).errors).toEqual(['invalid_channel']);
  });
});

describe('host server API: user actions', () => {
  it('revoke_tokens commits a user_revoked change (tenant version +1) and answers once consumers applied it', async () => {
    const version = lastVersion(tenant.tenant_id);
    const nowS = Math.floor(Date.now() / 1000);
    const res = await host('POST', tenant.tenant_id, `users/${USER.toUpperCase()}/revoke_tokens`, { authorization: basic(tenant) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { user_id: string; issued_before: number };
    expect(body.user_id).toBe(USER);
    expect(body.issued_before).toBeGreaterThanOrEqual(nowS);
    expect(body.issued_before).toBeLessThanOrEqual(nowS + 5);
    const event = reg.events.at(-1)!;
    expect(event).toMatchObject({ tenant_id: tenant.tenant_id, kind: 'user_revoked', version: version + 1, detail: { user_id: USER, before: body.issued_before } });
  });

  it('keeps the latest moment: an earlier issued_before is recorded as the later one already in force', async () => {
    const first = (await (await host('POST', other.tenant_id, `users/${USER}/revoke_tokens`, { authorization: basic(other), body: '{"issued_before":1790000000}' })).json()) as { issued_before: number };
    expect(first.issued_before).toBe(1_790_000_000);
    const res = await host('POST', other.tenant_id, `users/${USER}/revoke_tokens`, { authorization: basic(other), body: '{"issued_before":1780000000}' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ user_id: USER, issued_before: 1_790_000_000 });
    expect(reg.events.at(-1)).toMatchObject({ kind: 'user_revoked', detail: { user_id: USER, before: 1_790_000_000 } });
  });

  const badRevokes: Array<[string, string]> = [
    ['a moment beyond the skew', JSON.stringify({ issued_before: Math.floor(Date.now() / 1000) + 3600 })],
    ['a negative moment', '{"issued_before":-1}'],
    ['a fraction', '{"issued_before":1.5}'],
    ['a string', '{"issued_before":"1700000000"}'],
  ];
  it.each(badRevokes)('revoke_tokens refuses %s with 400 naming the allowed range', async (_name, body) => {
    const events = reg.events.length;
    const res = await host('POST', tenant.tenant_id, `users/${USER}/revoke_tokens`, { authorization: basic(tenant), body });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as { errors: string[]; problem: string };
    expect(answer.errors).toEqual(['invalid_body']);
    expect(answer.problem).toMatch(/integer number of unix seconds from 0 to \d+ \(now \+ 60 s\)/);
    expect(reg.events.length).toBe(events);
  });

  it('refuses an unknown member, a user id that is not a UUID, and a body on disconnect', async () => {
    const cases: Array<[string, string | undefined, RegExp]> = [
      [`users/${USER}/revoke_tokens`, '{"before":1}', /allowed: issued_before/],
      ['users/not-a-user/revoke_tokens', undefined, /must be a UUID/],
      ['users/not-a-user/disconnect', undefined, /must be a UUID/],
      [`users/${USER}/disconnect`, '{"x":1}', /takes no body/],
    ];
    for (const [path, body, problem] of cases) {
      const res = await host('POST', tenant.tenant_id, path, { authorization: basic(tenant), ...(body !== undefined && { body }) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { problem: string }).problem).toMatch(problem);
    }
  });

  it('disconnect commits a user_disconnected change without touching the tenant version', async () => {
    const version = lastVersion(tenant.tenant_id);
    const res = await host('POST', tenant.tenant_id, `users/${USER}/disconnect`, { authorization: basic(tenant), body: '{}' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ user_id: USER });
    expect(reg.events.at(-1)).toMatchObject({ tenant_id: tenant.tenant_id, kind: 'user_disconnected', version, detail: { user_id: USER } });
  });

  it('answers 503 change_not_propagated while a consumer holding its lease has not applied the change', async () => {
    const stuck = await reg.consumer(5000);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    stuck.subscribe(async (e) => {
      if (e.tenant_id === tenant.tenant_id && e.kind === 'user_disconnected') await released;
    });
    try {
      const res = await host('POST', tenant.tenant_id, `users/${USER}/disconnect`, { authorization: basic(tenant) });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(await res.json()).toEqual({ errors: ['change_not_propagated'], user_id: USER });
    } finally {
      release();
      stuck.close();
    }
  });

  it('webhooks (#32): a write that changes the events wanted waits for every consumer (503 change_not_propagated with what was committed); one that changes nothing does not', async () => {
    const t = hooked;
    const endpoint = (events: string[]) => JSON.stringify({ url: 'https://example.com/hook', events });
    const stuck = await reg.consumer(5000);
    const changes: unknown[] = [];
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    stuck.subscribe(async (e) => {
      if (e.tenant_id !== t.tenant_id || e.kind !== 'webhooks') return;
      changes.push(e.detail);
      await released;
    });
    try {
      // Nothing new wanted: no change, nothing to wait for, whoever lags.
      expect((await host('POST', t.tenant_id, 'webhooks', { authorization: basic(t), body: endpoint(['member_added']) })).status).toBe(201);
      const more = await host('POST', t.tenant_id, 'webhooks', { authorization: basic(t), body: endpoint(['user_connected']) });
      expect(more.status).toBe(503);
      expect(more.headers.get('retry-after')).toBe('1');
      const body = (await more.json()) as { errors: string[]; webhook: { endpoint_id: string; events: string[]; enabled: boolean; signing_secret: string } };
      expect(body).toMatchObject({ errors: ['change_not_propagated'], webhook: { events: ['user_connected'], enabled: true, signing_secret: expect.stringMatching(/^whsec_/) } });
      // The admin API says the same when switching that one off, and names who is behind.
      const off = await reg.admin('POST', `/admin/tenants/${t.tenant_id}/webhooks/${body.webhook.endpoint_id}/disable`);
      expect(off.status).toBe(503);
      expect(await off.json()).toMatchObject({ errors: ['change_not_propagated'], webhook: { endpoint_id: body.webhook.endpoint_id, enabled: false }, pending_consumers: expect.arrayContaining([expect.objectContaining({ consumer_id: stuck.consumerId })]) });
    } finally {
      release();
      stuck.close();
    }
    expect(changes[0]).toEqual({ webhook_events: ['member_added', 'user_connected'], webhooks_version: 2 });
  });

  it('hands the revocations to verifiers with the keys (GetTenantKeys reads them in the same snapshot)', async () => {
    const Keys = clientConstructor(REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE);
    const client = new Keys(`127.0.0.1:${reg.server.grpcPort}`, grpc.credentials.createInsecure()) as unknown as KeysClient;
    try {
      const keys = await new Promise<GetTenantKeysResponse>((resolve, reject) =>
        client.GetTenantKeys({ tenant_id: other.tenant_id }, internalMetadata(reg.internalToken), (err, res) => (err ? reject(err) : resolve(res))),
      );
      expect(keys.found).toBe(true);
      expect(keys.user_revocations).toEqual([{ user_id: USER, before: 1_790_000_000 }]);
    } finally {
      client.close();
    }
  });
});
