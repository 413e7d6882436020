import { randomUUID } from 'node:crypto';
import { signToken } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTenantWithSecret, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

// Operator-set channel rules (#13 item 1) across the whole stack: the admin
// API's 200 means every realtime instance decides with the new rules, so the
// very next request, on an instance that had the old rules cached, obeys them.
describe('channel rules across the whole stack', () => {
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
  const publishRest = (token: string, channel: string) =>
    fetch(`${stack.gatewayUrl}/api/v1/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data: 'x' }),
    });
  const rulesApi = (method: string, body?: unknown) =>
    fetch(`${stack.registryUrl}/admin/tenants/${tenant.tenant_id}/channel_rules`, {
      method,
      headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const topic = (c: string) => `tenants/${tenant.tenant_id}/channels/${c}`;
  let ref = 0;
  const ask = async (s: TestSocket, frame: Record<string, unknown>) => {
    const r = `r${++ref}`;
    s.send({ ...frame, ref: r });
    return s.next((f) => f.ref === r);
  };

  it('the next request after the 200, on either realtime instance, obeys the new rules; a reset restores the default', async () => {
    const user = randomUUID();
    const token = sign(user);
    // Both instances learn the tenant's (default) rules first: realtime2 over WebSocket, realtime1 through the gateway.
    const ws = await TestSocket.open(stack.realtimeWs[1]!, token);
    sockets.push(ws);
    expect(await ask(ws, { type: 'publish', topic: topic('news'), data: 1 })).toMatchObject({ type: 'published' });
    expect((await publishRest(token, 'news')).status).toBe(201);

    const set = await rulesApi('PUT', { default: ['subscribe', 'history'], channels: [{ pattern: 'chat:*', actions: ['subscribe', 'publish', 'history'] }] });
    expect(set.status).toBe(200);
    expect(await set.json()).toMatchObject({ tenant_id: tenant.tenant_id, version: 1, rules: { default: ['subscribe', 'history'] } });

    expect(await ask(ws, { type: 'publish', topic: topic('news'), data: 2 })).toEqual({ type: 'error', code: 'forbidden_channel', ref: expect.any(String) });
    const refused = await publishRest(token, 'news');
    expect(refused.status).toBe(403);
    expect(await refused.text()).toBe('{"errors":["forbidden_channel"]}');
    expect(await ask(ws, { type: 'publish', topic: topic('chat:lobby'), data: 3 })).toMatchObject({ type: 'published' });
    expect((await publishRest(token, 'chat:lobby')).status).toBe(201);
    // The rules are an upper bound a cap can only narrow.
    expect((await publishRest(sign(randomUUID(), { 'news*': ['publish'] }), 'news')).status).toBe(403);
    expect((await publishRest(sign(randomUUID(), { 'chat:*': ['subscribe'] }), 'chat:lobby')).status).toBe(403);

    const shown = await stack.admin('rules', 'get', tenant.tenant_id);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ version: 1, rules: { channels: [{ pattern: 'chat:*' }] } });

    const reset = await stack.admin('rules', 'reset', tenant.tenant_id);
    expect(reset.code, reset.stderr).toBe(0);
    expect(JSON.parse(reset.stdout)).toMatchObject({ version: 2 });
    expect(await ask(ws, { type: 'publish', topic: topic('news'), data: 4 })).toMatchObject({ type: 'published' });
    expect((await publishRest(token, 'news')).status).toBe(201);
  });

  it('an instance that first sees a tenant after its rules were set asks the registry and gets them', async () => {
    const { tenant: fresh, secret: freshSecret } = await createTenantWithSecret(stack);
    const set = await fetch(`${stack.registryUrl}/admin/tenants/${fresh.tenant_id}/channel_rules`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${stack.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ default: [], channels: [{ pattern: 'open', actions: ['subscribe'] }] }),
    });
    expect(set.status).toBe(200);
    // Neither instance has decided anything for this tenant yet: both ask the registry (TenantFeed.ChannelRules).
    for (const url of stack.realtimeWs) {
      const ws = await TestSocket.open(url, signToken({ secret: freshSecret, tenantId: fresh.tenant_id, userId: randomUUID() }));
      sockets.push(ws);
      const at = (c: string) => `tenants/${fresh.tenant_id}/channels/${c}`;
      expect(await ask(ws, { type: 'subscribe', topic: at('news') })).toMatchObject({ type: 'error', code: 'forbidden_channel' });
      expect(await ask(ws, { type: 'subscribe', topic: at('open') })).toMatchObject({ type: 'subscribed' });
    }
  });

  it('refuses an invalid document with 400 invalid_channel_rules and a problem, and changes nothing', async () => {
    const res = await rulesApi('PUT', { default: ['read'] });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ errors: ['invalid_channel_rules'], problem: '"default" must be an array of actions from: subscribe, publish, history, presence' });
    expect(await (await rulesApi('GET')).json()).toMatchObject({ version: 2 });
  });
});
