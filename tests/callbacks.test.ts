import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { callbackAnswer, verifyCallback, type CallbackRequest } from '@service-relay/host';
import { signToken } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createTenantWithSecret, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

/**
 * Subscribe/publish callbacks (#32 item 4) across the whole stack: two
 * realtime instances ask a real HTTP receiver started here (the host), which
 * verifies every request with the host SDK and answers per channel. Allow,
 * deny, no answer in time (callback_unavailable), a cached answer (the
 * receiver counts its requests), a cap the host cannot widen, publishes over
 * WebSocket and REST (through the gateway), and the admin 200 in force on
 * both instances.
 */
describe('callbacks across the whole stack', () => {
  let stack: Stack;
  let tenant: CreatedTenant;
  let jwtSecret: string;
  let signingSecrets: string[] = [];
  let receiver: Server;
  let url = '';
  /** Every verified request, in arrival order; a request the SDK refused is kept apart. */
  const asked: CallbackRequest[] = [];
  const refused: string[] = [];
  const hanging: ServerResponse[] = [];
  const sockets: TestSocket[] = [];
  const TIMEOUT_MS = 400;

  /** The host's policy, by channel. */
  const answer = (req: CallbackRequest, res: ServerResponse) => {
    const c = req.channel;
    if (c.startsWith('room:slow')) return void hanging.push(res);
    const allow = !c.startsWith('room:deny') && !(req.type === 'publish' && c.startsWith('room:ro'));
    const ttlS = c.startsWith('room:cached') ? 30 : undefined;
    const presence = c.startsWith('presence:') ? { name: `host says ${req.user_id.slice(0, 4)}` } : undefined;
    res.writeHead(200, { 'content-type': 'application/json' }).end(callbackAnswer(allow, { ...(ttlS !== undefined && { ttlS }), ...(presence && { presence }) }));
  };

  beforeAll(async () => {
    receiver = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        verifyCallback(body, req.headers, signingSecrets).then(
          (parsed) => {
            asked.push(parsed);
            answer(parsed, res);
          },
          (err: Error) => {
            refused.push(err.message);
            res.writeHead(401).end();
          },
        );
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/relay/callback`;
    stack = await startStack();
    ({ tenant, secret: jwtSecret } = await createTenantWithSecret(stack));
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    for (const res of hanging) res.destroy();
    await stack?.stop();
    await new Promise<void>((resolve) => receiver?.close(() => resolve()));
  });

  const sign = (userId: string, cap?: unknown) => signToken({ secret: jwtSecret, tenantId: tenant.tenant_id, userId, ...(cap !== undefined && { claims: { cap } }) });
  const topic = (c: string) => `tenants/${tenant.tenant_id}/channels/${c}`;
  const open = async (instance: number, token: string) => {
    const s = await TestSocket.open(stack.realtimeWs[instance]!, token);
    sockets.push(s);
    return s;
  };
  let ref = 0;
  const ask = async (s: TestSocket, frame: Record<string, unknown>, timeoutMs = 5000) => {
    const r = `r${++ref}`;
    s.send({ ...frame, ref: r });
    const { ref: _ref, ...rest } = await s.next((f) => f.ref === r, timeoutMs);
    return rest;
  };
  const publishRest = (token: string, channel: string) =>
    fetch(`${stack.gatewayUrl}/api/v1/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data: 'x' }),
    });
  const hostApi = (method: string, path: string, body?: unknown) =>
    fetch(`${stack.gatewayUrl}/api/host/tenants/${tenant.tenant_id}/callbacks${path}`, {
      method,
      headers: { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret), 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const askedFor = (channel: string) => asked.filter((a) => a.channel === channel);

  it('set with the admin CLI: the signing secret is shown once, the 200 is in force on both instances', async () => {
    // Before: both instances know the tenant has no callbacks (a subscribe asks no one).
    const user = randomUUID();
    for (const i of [0, 1]) expect(await ask(await open(i, sign(user)), { type: 'subscribe', topic: topic('room:deny-before') })).toMatchObject({ type: 'subscribed' });
    const set = await stack.admin('callbacks', 'set', tenant.tenant_id, '--url', url, '--subscribe', 'room:*', '--subscribe', 'secret:*', '--subscribe', 'presence:*', '--publish', 'room:*', '--timeout-ms', String(TIMEOUT_MS));
    expect(set.code, set.stderr).toBe(0);
    const view = JSON.parse(set.stdout) as { signing_secret: string; callbacks: unknown; version: number };
    expect(view).toMatchObject({ version: 1, has_previous_secret: false, callbacks: { url, subscribe: ['presence:*', 'room:*', 'secret:*'], publish: ['room:*'], timeout_ms: TIMEOUT_MS } });
    expect(view.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    signingSecrets = [view.signing_secret];
    // Shown once: a GET (admin or host) never carries it.
    const shown = await hostApi('GET', '');
    expect(shown.status).toBe(200);
    expect(await shown.json()).not.toHaveProperty('signing_secret');
    // In force on both instances at once: the next subscribe on each asks the host, which denies.
    for (const i of [0, 1]) expect(await ask(await open(i, sign(user)), { type: 'subscribe', topic: topic('room:deny-after') })).toEqual({ type: 'error', code: 'forbidden_channel' });
    expect(askedFor('room:deny-after')).toHaveLength(2);
    expect(refused).toEqual([]);
  });

  it('allow: the host gets the user, channel and verified claims, signed; its presence member data is used', async () => {
    const user = randomUUID();
    const s = await open(1, sign(user, { 'room:*': ['subscribe', 'publish'], 'presence:*': ['subscribe', 'presence'] }));
    expect(await ask(s, { type: 'subscribe', topic: topic('room:allowed') })).toMatchObject({ type: 'subscribed' });
    const [req] = askedFor('room:allowed');
    expect(req).toEqual({
      type: 'subscribe',
      tenant_id: tenant.tenant_id,
      user_id: user,
      channel: 'room:allowed',
      transport: 'ws',
      claims: { tenant_id: tenant.tenant_id, user_id: user, exp: expect.any(Number), cap: { 'presence:*': ['subscribe', 'presence'], 'room:*': ['subscribe', 'publish'] } },
    });
    expect(await ask(s, { type: 'subscribe', topic: topic('presence:lobby'), member: { name: 'from the client' } })).toMatchObject({ type: 'subscribed' });
    const members = await ask(s, { type: 'presence', topic: topic('presence:lobby') });
    expect(members).toMatchObject({ type: 'presence', members: [{ user_id: user, data: { name: `host says ${user.slice(0, 4)}` } }] });
  });

  it('deny: forbidden_channel; no answer within the timeout: callback_unavailable, never an allow', async () => {
    const s = await open(0, sign(randomUUID()));
    expect(await ask(s, { type: 'subscribe', topic: topic('room:deny') })).toEqual({ type: 'error', code: 'forbidden_channel' });
    const started = performance.now();
    expect(await ask(s, { type: 'subscribe', topic: topic('room:slow') })).toEqual({ type: 'error', code: 'callback_unavailable' });
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(TIMEOUT_MS - 20);
    expect(waited).toBeLessThan(TIMEOUT_MS + 1500);
    // The connection stays usable.
    expect(await ask(s, { type: 'subscribe', topic: topic('room:after-slow') })).toMatchObject({ type: 'subscribed' });
    // Nothing was delivered on the refused channel: a publish there by another user is not seen.
    expect(askedFor('room:slow')).toHaveLength(1);
  });

  it('a cached answer: within its ttl_s the same user and channel do not ask again; another user does', async () => {
    const user = randomUUID();
    const s = await open(0, sign(user));
    expect(await ask(s, { type: 'subscribe', topic: topic('room:cached') })).toMatchObject({ type: 'subscribed' });
    expect(await ask(s, { type: 'unsubscribe', topic: topic('room:cached') })).toMatchObject({ type: 'unsubscribed' });
    const again = await open(0, sign(user));
    expect(await ask(again, { type: 'subscribe', topic: topic('room:cached') })).toMatchObject({ type: 'subscribed' });
    expect(await ask(s, { type: 'subscribe', topic: topic('room:cached') })).toMatchObject({ type: 'subscribed' });
    expect(askedFor('room:cached')).toHaveLength(1);
    const other = await open(0, sign(randomUUID()));
    expect(await ask(other, { type: 'subscribe', topic: topic('room:cached') })).toMatchObject({ type: 'subscribed' });
    expect(askedFor('room:cached')).toHaveLength(2);
  });

  it("a host that allows everything cannot widen the token's cap: refused before the host is asked", async () => {
    const s = await open(1, sign(randomUUID(), { 'room:*': ['subscribe'] }));
    expect(await ask(s, { type: 'subscribe', topic: topic('secret:vault') })).toEqual({ type: 'error', code: 'forbidden_channel' });
    expect(await ask(s, { type: 'publish', topic: topic('room:open'), data: 1 })).toEqual({ type: 'error', code: 'forbidden_channel' });
    expect(askedFor('secret:vault')).toHaveLength(0);
    expect(askedFor('room:open')).toHaveLength(0);
    // What the cap allows, the host still decides.
    expect(await ask(s, { type: 'subscribe', topic: topic('room:deny-cap') })).toEqual({ type: 'error', code: 'forbidden_channel' });
    expect(askedFor('room:deny-cap')).toHaveLength(1);
  });

  it('publish callbacks over WebSocket and over REST through the gateway', async () => {
    const token = sign(randomUUID());
    const s = await open(1, token);
    expect(await ask(s, { type: 'publish', topic: topic('room:rw'), data: 1 })).toMatchObject({ type: 'published' });
    expect(await ask(s, { type: 'publish', topic: topic('room:ro'), data: 1 })).toEqual({ type: 'error', code: 'forbidden_channel' });
    expect(await ask(s, { type: 'publish', topic: topic('room:slow-pub'), data: 1 })).toEqual({ type: 'error', code: 'callback_unavailable' });
    expect((await publishRest(token, 'room:rw')).status).toBe(201);
    const ro = await publishRest(token, 'room:ro');
    expect(ro.status).toBe(403);
    expect(await ro.text()).toBe('{"errors":["forbidden_channel"]}');
    const slow = await publishRest(token, 'room:slow-rest');
    expect(slow.status).toBe(503);
    expect(await slow.text()).toBe('{"errors":["callback_unavailable"]}');
    expect(asked.filter((a) => a.type === 'publish').map((a) => [a.channel, a.transport])).toEqual([
      ['room:rw', 'ws'],
      ['room:ro', 'ws'],
      ['room:slow-pub', 'ws'],
      ['room:rw', 'rest'],
      ['room:ro', 'rest'],
      ['room:slow-rest', 'rest'],
    ]);
    // A channel no publish pattern names asks no one.
    expect(await ask(s, { type: 'publish', topic: topic('secret:x'), data: 1 })).toMatchObject({ type: 'published' });
  });

  it('host server API: rotate the secret (both signatures until expire_previous), then remove: in force everywhere, cached answers gone', async () => {
    const user = randomUUID();
    const rotated = await hostApi('POST', '/secret/rotate');
    expect(rotated.status).toBe(200);
    const view = (await rotated.json()) as { signing_secret: string };
    expect(view).toMatchObject({ version: 2, has_previous_secret: true });
    // The next request verifies with the new secret alone, and with the old one alone (the overlap).
    const oldSecret = signingSecrets[0]!;
    signingSecrets = [view.signing_secret];
    expect(await ask(await open(0, sign(user)), { type: 'subscribe', topic: topic('room:cached-rot') })).toMatchObject({ type: 'subscribed' });
    signingSecrets = [oldSecret];
    expect(await ask(await open(1, sign(user)), { type: 'subscribe', topic: topic('room:cached-rot') })).toMatchObject({ type: 'subscribed' });
    expect(refused).toEqual([]);
    expect((await hostApi('POST', '/secret/expire_previous')).status).toBe(200);
    // The change emptied every cached answer of the tenant: asked again, and now only the new secret verifies.
    expect(await ask(await open(0, sign(user)), { type: 'subscribe', topic: topic('room:cached-rot') })).toEqual({ type: 'error', code: 'callback_unavailable' });
    expect(refused).toHaveLength(1);
    signingSecrets = [view.signing_secret];

    const removed = await hostApi('DELETE', '');
    expect(removed.status).toBe(200);
    expect(await removed.json()).toMatchObject({ callbacks: null, version: 4 });
    const before = asked.length;
    for (const i of [0, 1]) expect(await ask(await open(i, sign(user)), { type: 'subscribe', topic: topic('room:deny') })).toMatchObject({ type: 'subscribed' });
    expect(asked.length).toBe(before);
    // A bad document is the contract's 400 with what is wrong.
    const bad = await hostApi('PUT', '', { url: 'http://example.com/cb', subscribe: ['*'] });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ errors: ['invalid_callbacks'], problem: expect.stringContaining('https') });
  });
});
