import { randomUUID } from 'node:crypto';
import { signToken } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenantWithSecret, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

// Channel authorization (#13) across the whole stack: a token signed with a
// `cap` claim goes through the real verifier, gateway and realtime processes.
describe('channel authorization across the whole stack', () => {
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

  const sign = (userId: string, cap?: unknown) => signToken({ secret, tenantId: tenant.tenant_id, userId, ...(cap !== undefined && { claims: { cap } }) });
  const api = (token: string, channel: string, method: 'GET' | 'POST') =>
    fetch(`${stack.gatewayUrl}/api/v1/channels/${channel}/messages`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(method === 'POST' && { body: JSON.stringify({ data: 'x' }) }),
    });

  it('REST through the gateway: a cap allows what it lists and answers 403 forbidden_channel otherwise', async () => {
    const reader = sign(randomUUID(), { 'orders.*': ['subscribe', 'history'] });
    expect((await api(reader, 'orders.eu', 'GET')).status).toBe(200);
    const refused = await api(reader, 'orders.eu', 'POST');
    expect(refused.status).toBe(403);
    expect(await refused.text()).toBe('{"errors":["forbidden_channel"]}');
    expect((await api(reader, 'billing', 'GET')).status).toBe(403);
    // Someone else's user channel, even without a cap.
    expect((await api(sign(randomUUID()), `user:${randomUUID()}`, 'GET')).status).toBe(403);
  });

  it('a cap as large as the 8 KiB token allows passes the verifier, the gateway header and realtime', async () => {
    const cap = Object.fromEntries(Array.from({ length: 36 }, (_, i) => [`${String(i).padStart(2, '0')}${'p'.repeat(110)}*`, ['history']]));
    const token = sign(randomUUID(), cap);
    expect(token.length).toBeGreaterThan(6000);
    expect(token.length).toBeLessThanOrEqual(8192);
    expect((await api(token, `35${'p'.repeat(110)}.x`, 'GET')).status).toBe(200);
    expect((await api(token, 'other', 'GET')).status).toBe(403);
  });

  it('a malformed cap makes the token invalid, like any other bad claim', async () => {
    const res = await api(sign(randomUUID(), { 'orders.*': ['admin'] }), 'orders.eu', 'GET');
    expect(res.status).toBe(401);
    expect(await res.text()).toBe('{"errors":["invalid_or_missing_token"]}');
  });

  it('WebSocket: a forbidden subscribe is an error frame and the connection stays', async () => {
    const user = randomUUID();
    const s = await TestSocket.open(stack.realtimeWs[1]!, sign(user, { 'chat:*': ['subscribe'], [`user:${user}`]: ['subscribe'] }));
    sockets.push(s);
    const topic = (c: string) => `tenants/${tenant.tenant_id}/channels/${c}`;
    s.send({ type: 'subscribe', topic: topic('orders.eu'), ref: 'no' });
    expect(await s.next((f) => f.ref === 'no')).toEqual({ type: 'error', code: 'forbidden_channel', ref: 'no' });
    s.send({ type: 'subscribe', topic: topic(`user:${randomUUID()}`), ref: 'other' });
    expect(await s.next((f) => f.ref === 'other')).toMatchObject({ type: 'error', code: 'forbidden_channel' });
    s.send({ type: 'subscribe', topic: topic(`user:${user}`), ref: 'mine' });
    expect(await s.next((f) => f.ref === 'mine')).toMatchObject({ type: 'subscribed' });
    s.send({ type: 'subscribe', topic: topic('chat:lobby'), ref: 'yes' });
    expect(await s.next((f) => f.ref === 'yes')).toMatchObject({ type: 'subscribed' });
  });
});
