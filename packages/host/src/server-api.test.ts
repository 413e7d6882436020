import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// A test may start a service in-process; the package itself never imports one.
import { startTestRegistry, type TestRegistry } from '../../../services/tenant-registry/src/testing/test-registry';
import { createHostClient, HostClientError, type HostClient } from './index.js';

interface Created {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

async function listen(handler: Handler): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handler(req, Buffer.concat(chunks).toString('utf8'), res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function caught(p: Promise<unknown>): Promise<HostClientError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(HostClientError);
    return err as HostClientError;
  }
  throw new Error('expected a HostClientError');
}

describe('host client: server API against a real registry (realtime stubbed)', () => {
  let reg: TestRegistry;
  let realtime: Server;
  let tenant: Created;
  let client: HostClient;
  const published: unknown[] = [];

  beforeAll(async () => {
    const rt = await listen((req, body, res) => {
      if (req.url === '/internal/server/messages') {
        const { channels, data } = JSON.parse(body) as { channels: string[]; data: unknown };
        published.push(JSON.parse(body));
        const messages = channels.map((channel, i) => ({ id: `1-${i}`, channel, user_id: null, from: 'server', data, created_at: '2026-01-01T00:00:00.000Z' }));
        res.writeHead(201, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ messages }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"channel":"room","members":[{"user_id":"u1","data":{"typing":true}}]}');
    });
    realtime = rt.server;
    reg = await startTestRegistry({ env: { REALTIME_URL: rt.url } });
    tenant = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
    client = createHostClient({ baseUrl: reg.baseUrl, tenantId: tenant.tenant_id, clientId: tenant.host_sync_client_id, clientSecret: tenant.host_sync_client_secret, refreshIntervalMs: 0 });
  });
  afterAll(async () => {
    client?.close();
    await reg?.stop();
    await new Promise((resolve) => realtime?.close(resolve));
  });

  it('publish and publishMany answer the server messages, in the channels’ order', async () => {
    const one = await client.publish('news', { n: 1 }, { idempotencyKey: 'k1' });
    expect(one).toEqual({ id: '1-0', channel: 'news', user_id: null, from: 'server', data: { n: 1 }, created_at: '2026-01-01T00:00:00.000Z' });
    expect(published.at(-1)).toEqual({ channels: ['news'], data: { n: 1 }, idempotency_key: 'k1' });
    const many = await client.publishMany(['a', 'b', 'c'], 'hi');
    expect(many.map((m) => m.channel)).toEqual(['a', 'b', 'c']);
  });

  it('presence answers the listing', async () => {
    expect(await client.presence('room')).toEqual({ channel: 'room', members: [{ user_id: 'u1', data: { typing: true } }] });
  });

  it('revokeUserTokens and disconnectUser resolve once the change is in force', async () => {
    const user = randomUUID();
    const nowS = Math.floor(Date.now() / 1000);
    expect((await client.revokeUserTokens(user)).issuedBefore).toBeGreaterThanOrEqual(nowS);
    expect(await client.revokeUserTokens(user, { issuedBefore: new Date((nowS - 100) * 1000) })).toEqual({ issuedBefore: expect.any(Number) });
    expect(reg.events.at(-1)).toMatchObject({ kind: 'user_revoked', detail: { user_id: user } });
    await client.disconnectUser(user);
    expect(reg.events.at(-1)).toMatchObject({ kind: 'user_disconnected', detail: { user_id: user } });
  });

  it('a refused request is invalid_request with the server’s problem; wrong credentials are invalid_credentials', async () => {
    const err = await caught(client.revokeUserTokens(randomUUID(), { issuedBefore: Math.floor(Date.now() / 1000) + 3600 }));
    expect(err.code).toBe('invalid_request');
    expect(err.status).toBe(400);
    expect(err.errorCode).toBe('invalid_body');
    expect(err.problem).toMatch(/now \+ 60 s/);
    expect((await caught(client.publishMany(['no spaces'], 1))).errorCode).toBe('invalid_channel');
    const wrong = createHostClient({ baseUrl: reg.baseUrl, tenantId: tenant.tenant_id, clientId: tenant.host_sync_client_id, clientSecret: 'x'.repeat(43), refreshIntervalMs: 0 });
    const refused = await caught(wrong.publish('a', 1));
    expect(refused.code).toBe('invalid_credentials');
    expect(`${refused.message} ${JSON.stringify(refused)}`).not.toContain(tenant.host_sync_client_secret);
  });
});

describe('host client: server API error mapping', () => {
  let stub: { server: Server; url: string };
  let answer: { status: number; body: string; headers?: Record<string, string> } = { status: 200, body: '{}' };
  beforeAll(async () => {
    stub = await listen((_req, _body, res) => {
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(answer.body);
    });
  });
  afterAll(async () => {
    await new Promise((resolve) => stub?.server.close(resolve));
  });
  const client = () => createHostClient({ baseUrl: stub.url, tenantId: randomUUID(), clientId: 'hs_x', clientSecret: 's', refreshIntervalMs: 0 });

  it.each([
    [413, '{"errors":["payload_too_large"]}', {}, 'payload_too_large'],
    [503, '{"errors":["change_not_propagated"],"user_id":"u"}', { 'retry-after': '1' }, 'not_propagated'],
    [503, '{"errors":["unavailable"]}', {}, 'unavailable'],
    [429, '{"errors":["rate_limited"]}', { 'retry-after': '7' }, 'rate_limited'],
    [418, '{}', {}, 'invalid_response'],
    [200, 'not json', {}, 'invalid_response'],
  ] as const)('status %i is %s', async (status, body, headers, code) => {
    answer = { status, body, headers };
    const err = await caught(client().disconnectUser('u'));
    expect(err.code).toBe(code);
  });

  it('an unreachable service is unavailable', async () => {
    const c = createHostClient({ baseUrl: 'http://127.0.0.1:1', tenantId: randomUUID(), clientId: 'hs_x', clientSecret: 's', refreshIntervalMs: 0 });
    expect((await caught(c.presence('a'))).code).toBe('unavailable');
  });
});
