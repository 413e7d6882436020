import { randomUUID } from 'node:crypto';
import { signToken } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createTenantWithSecret, type CreatedTenant } from './support/host';
import { waitForHttp } from './support/processes';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

// The host server API (#13 item 4) across the whole stack: every service its
// own process, two realtime instances. The gateway sends REST to realtime1;
// the registry publishes through realtime2.
describe('host server API across the whole stack', () => {
  let stack: Stack;
  let tenant: CreatedTenant;
  let secret: string;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    stack = await startStack();
    ({ tenant, secret } = await createTenantWithSecret(stack));
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await stack?.stop();
  });

  const nowS = () => Math.floor(Date.now() / 1000);
  /** A token issued `agoS` seconds ago (its iat), valid for five minutes from now. */
  const sign = (userId: string, agoS = 0) => signToken({ secret, tenantId: tenant.tenant_id, userId, exp: nowS() + 300, claims: { iat: nowS() - agoS } });
  const topic = (channel: string) => `tenants/${tenant.tenant_id}/channels/${channel}`;
  const hostCall = (method: string, path: string, body?: unknown, authorization = basic(tenant.host_sync_client_id, tenant.host_sync_client_secret)) =>
    fetch(`${stack.gatewayUrl}/api/host/tenants/${tenant.tenant_id}/${path}`, {
      method,
      headers: { authorization, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const me = (token: string) => fetch(`${stack.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
  const open = async (instance: number, token: string, channels: string[] = []) => {
    const s = await TestSocket.open(stack.realtimeWs[instance]!, token);
    sockets.push(s);
    for (const c of channels) {
      s.send({ type: 'subscribe', topic: topic(c), ref: c });
      expect(await s.next((f) => f.ref === c)).toMatchObject({ type: 'subscribed' });
    }
    return s;
  };

  it('refuses a wrong credential with the fetch’s exact 401 through the gateway', async () => {
    const wrong = basic(tenant.host_sync_client_id, 'x'.repeat(43));
    const res = await hostCall('POST', 'messages', { channels: ['a'], data: 1 }, wrong);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Basic realm="service-relay"');
    expect(await res.text()).toBe('{"errors":["invalid_host_sync_credentials"]}');
  });

  it('a server publish to two channels reaches subscribers on both instances, from "server", and is in history', async () => {
    const onOne = await open(0, sign(randomUUID()), ['news', 'alerts']);
    const onTwo = await open(1, sign(randomUUID()), ['news', 'alerts']);
    const res = await hostCall('POST', 'messages', { channels: ['news', 'alerts'], data: { text: 'maintenance at noon' } });
    expect(res.status).toBe(201);
    const { messages } = (await res.json()) as { messages: Array<Record<string, unknown>> };
    expect(messages).toEqual([
      { id: expect.any(String), channel: 'news', user_id: null, from: 'server', data: { text: 'maintenance at noon' }, created_at: expect.any(String) },
      { id: expect.any(String), channel: 'alerts', user_id: null, from: 'server', data: { text: 'maintenance at noon' }, created_at: expect.any(String) },
    ]);
    for (const s of [onOne, onTwo]) {
      for (const [i, c] of ['news', 'alerts'].entries()) {
        const frame = await s.next((f) => f.type === 'message' && f.topic === topic(c));
        expect(frame).toEqual({ type: 'message', topic: topic(c), id: messages[i]!.id, user_id: null, from: 'server', data: { text: 'maintenance at noon' }, created_at: messages[i]!.created_at });
      }
    }
    const history = await fetch(`${stack.gatewayUrl}/api/v1/channels/news/messages`, { headers: { authorization: `Bearer ${sign(randomUUID())}` } });
    expect(((await history.json()) as { messages: unknown[] }).messages).toContainEqual(messages[0]);
  });

  it('presence lists, through the registry and the other instance, who is subscribed on a presence channel', async () => {
    const ann = randomUUID();
    const s = await TestSocket.open(stack.realtimeWs[0]!, sign(ann));
    sockets.push(s);
    s.send({ type: 'subscribe', topic: topic('presence:lobby'), member: { name: 'Ann' }, ref: 'p' });
    expect(await s.next((f) => f.ref === 'p')).toMatchObject({ type: 'subscribed' });
    const res = await hostCall('GET', 'channels/presence%3Alobby/presence');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ channel: 'presence:lobby', members: [{ user_id: ann, data: { name: 'Ann' } }] });
  });

  it('revoke_tokens: that user’s live WebSockets on both instances close 4401 and its REST calls are refused, another user keeps working', async () => {
    const alice = randomUUID();
    const bob = randomUUID();
    const aliceToken = sign(alice, 60);
    const bobToken = sign(bob, 60);
    // Cached by the gateway before the revocation: the cache must not answer with it afterwards.
    expect((await me(aliceToken)).status).toBe(200);
    expect((await me(bobToken)).status).toBe(200);
    const aliceOnOne = await open(0, aliceToken);
    const aliceOnTwo = await open(1, aliceToken, ['room']);
    const bobOnTwo = await open(1, bobToken, ['room']);

    const res = await hostCall('POST', `users/${alice}/revoke_tokens`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { user_id: string; issued_before: number };
    expect(body.user_id).toBe(alice);
    // The answer means every instance applied it: the sockets are closing, not "eventually".
    expect(await aliceOnTwo.closed()).toBe(4401);
    expect(await aliceOnOne.closed()).toBe(4401);
    const refused = await me(aliceToken);
    expect(refused.status).toBe(401);
    expect(await refused.text()).toBe('{"errors":["invalid_or_missing_token"]}');
    await expect(TestSocket.open(stack.realtimeWs[1]!, aliceToken)).rejects.toMatchObject({ status: 401 });

    // Bob, same tenant, is untouched: REST and his live socket.
    expect((await me(bobToken)).status).toBe(200);
    const published = await fetch(`${stack.gatewayUrl}/api/v1/channels/room/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bobToken}`, 'content-type': 'application/json' },
      body: '{"data":"still here"}',
    });
    expect(published.status).toBe(201);
    expect(await bobOnTwo.next((f) => f.type === 'message' && f.data === 'still here')).toMatchObject({ user_id: bob });
    expect(bobOnTwo.closeCode).toBeUndefined();

    // A token Alice's host issues from now on works (iat at or after the moment).
    expect(sign(alice)).not.toBe(aliceToken);
    expect((await me(sign(alice))).status).toBe(200);
  });

  it('a verifier that starts after a revocation still knows it (the registry persists it)', async () => {
    const carol = randomUUID();
    const old = sign(carol, 60);
    expect((await hostCall('POST', `users/${carol}/revoke_tokens`, { issued_before: nowS() })).status).toBe(200);
    await stack.processes.verifier1!.stop();
    await stack.restart('verifier1');
    // The gateway's verifier connection is back once its readiness says so.
    await waitForHttp(stack.health.gateway!.replace('/healthz', '/readyz'), 30_000);
    const res = await me(old);
    expect(res.status).toBe(401);
    expect((await me(sign(carol))).status).toBe(200);
  });

  it('disconnect closes every live connection of that user on both instances with 4409; the user’s tokens stay valid', async () => {
    const dave = randomUUID();
    const erin = randomUUID();
    const token = sign(dave);
    const onOne = await open(0, token);
    const onTwo = await open(1, token);
    const other = await open(1, sign(erin), ['lobby']);
    const res = await hostCall('POST', `users/${dave}/disconnect`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ user_id: dave });
    expect(await onOne.closed()).toBe(4409);
    expect(await onTwo.closed()).toBe(4409);
    expect(other.closeCode).toBeUndefined();
    other.send({ type: 'subscribe', topic: topic('lobby2'), ref: 'alive' });
    expect(await other.next((f) => f.ref === 'alive')).toMatchObject({ type: 'subscribed' });
    expect((await me(token)).status).toBe(200);
  });

  it('refuses an issued_before in the future with 400 naming the allowed range', async () => {
    const res = await hostCall('POST', `users/${randomUUID()}/revoke_tokens`, { issued_before: nowS() + 3600 });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: string[]; problem: string };
    expect(body.errors).toEqual(['invalid_body']);
    expect(body.problem).toMatch(/from 0 to \d+ \(now \+ 60 s\)/);
  });
});
