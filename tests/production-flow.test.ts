import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from './support/stack';
import { fetchSecret, me, signWithJose, signWithPyJwt, type CreatedTenant } from './support/host';
import { TestSocket } from './support/ws-client';

const UNAUTHORIZED_FETCH = '{"errors":["invalid_host_sync_credentials"]}';

// The seed's production flow (section 5) over the distributed deployment:
// every service its own process, two verifiers, two realtime instances.
describe('production flow across the whole stack', () => {
  let stack: Stack;
  let tenant: CreatedTenant;
  let firstSecret: string;
  const sockets: TestSocket[] = [];
  const topic = () => `tenants/${tenant.tenant_id}/channels/lobby`;

  const open = async (instance: number, token: string) => {
    const s = await TestSocket.open(stack.realtimeWs[instance]!, token);
    sockets.push(s);
    s.send({ type: 'subscribe', topic: topic(), ref: 's' });
    await s.next((f) => f.type === 'subscribed');
    return s;
  };
  const admin = async (...args: string[]) => {
    // The operator's own tool, as a process of its own (the other suites run its code in-process).
    const r = await stack.adminProcess(...args);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };

  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await stack?.stop();
  });

  it('an operator creates a tenant with the CLI and the host fetches its secret through the gateway', async () => {
    tenant = (await admin('create-tenant')) as unknown as CreatedTenant;
    expect(tenant.tenant_id).toMatch(/^[0-9a-f-]{36}$/);
    const res = await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store, private');
    expect(res.headers.get('pragma')).toBe('no-cache');
    const body = (await res.json()) as Record<string, string>;
    expect(body).toMatchObject({ kid: tenant.tenant_id, algorithm: 'HS256', issuer: 'service-relay', audience: 'service-relay' });
    expect(body.jwt_secret_primary!.length).toBeGreaterThanOrEqual(43);
    firstSecret = body.jwt_secret_primary!;
  });

  it('tokens signed by jose and by PyJWT are served over REST', async () => {
    const alice = randomUUID();
    const bob = randomUUID().toUpperCase();
    for (const [token, user] of [
      [await signWithJose(firstSecret, tenant.tenant_id, alice), alice],
      [await signWithPyJwt(firstSecret, tenant.tenant_id, bob), bob],
    ] as const) {
      const res = await me(stack.gatewayUrl, token);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ tenant_id: tenant.tenant_id, user_id: user });
    }
    const forged = await signWithJose('x'.repeat(43), tenant.tenant_id, alice);
    const res = await me(stack.gatewayUrl, forged);
    expect(res.status).toBe(401);
    expect(await res.text()).toBe('{"errors":["invalid_or_missing_token"]}');
  });

  it('a message published over REST or WebSocket reaches subscribers on both realtime instances, in order', async () => {
    const token = await signWithJose(firstSecret, tenant.tenant_id, randomUUID());
    const a = await open(0, token);
    const b = await open(1, token);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${stack.gatewayUrl}/api/v1/channels/lobby/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ data: { n: i } }),
      });
      expect(res.status).toBe(201);
      ids.push(((await res.json()) as { id: string }).id);
    }
    b.send({ type: 'publish', topic: topic(), data: { n: 5 }, ref: 'p' });
    const published = await b.next((f) => f.type === 'published');
    expect(published.ref).toBe('p');
    ids.push(published.id as string);
    for (const s of [a, b]) {
      const got: unknown[] = [];
      for (let i = 0; i < 6; i++) got.push((await s.next((f) => f.type === 'message')).data);
      expect(got).toEqual([0, 1, 2, 3, 4, 5].map((n) => ({ n })));
    }
    const history = await fetch(`${stack.gatewayUrl}/api/v1/channels/lobby/messages?limit=100`, { headers: { authorization: `Bearer ${token}` } });
    const messages = ((await history.json()) as { messages: Array<{ id: string }> }).messages;
    expect(messages.map((m) => m.id)).toEqual(ids);
    a.close();
    b.close();
  });

  it('rotate, expire_previous, disable, enable and revoke_all are each observed by every instance', async () => {
    const oldToken = await signWithJose(firstSecret, tenant.tenant_id, randomUUID());
    const oldSockets = [await open(0, oldToken), await open(1, oldToken)];

    // rotate: nothing closes, the old token still verifies, new tokens use the new primary.
    const rotated = await admin('rotate-secret', tenant.tenant_id);
    expect(rotated.has_previous_secret).toBe(true);
    expect((await me(stack.gatewayUrl, oldToken)).status).toBe(200);
    const fetched = (await (await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret)).json()) as { jwt_secret_primary: string };
    expect(fetched.jwt_secret_primary).not.toBe(firstSecret);
    const newToken = await signWithPyJwt(fetched.jwt_secret_primary, tenant.tenant_id, randomUUID());
    const newSockets = [await open(0, newToken), await open(1, newToken)];
    expect(oldSockets.every((s) => s.closeCode === undefined)).toBe(true);

    // expire_previous: exactly the connections on the removed secret close, on both instances.
    await admin('expire-previous', tenant.tenant_id);
    for (const s of oldSockets) expect(await s.closed(1000)).toBe(4401);
    expect(newSockets.every((s) => s.closeCode === undefined)).toBe(true);
    expect((await me(stack.gatewayUrl, oldToken)).status).toBe(401);
    expect((await me(stack.gatewayUrl, newToken)).status).toBe(200);

    // disable: every connection of the tenant closes; REST, WebSocket and fetch are refused.
    await admin('disable', tenant.tenant_id);
    for (const s of newSockets) expect(await s.closed(1000)).toBe(4401);
    expect((await me(stack.gatewayUrl, newToken)).status).toBe(401);
    await expect(TestSocket.open(stack.realtimeWs[1]!, newToken)).rejects.toMatchObject({ status: 401 });
    const refused = await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret);
    expect(refused.status).toBe(401);
    expect(await refused.text()).toBe(UNAUTHORIZED_FETCH);

    // enable: the same token works again.
    await admin('enable', tenant.tenant_id);
    expect((await me(stack.gatewayUrl, newToken)).status).toBe(200);
    const live = [await open(0, newToken), await open(1, newToken)];

    // revoke_all: every connection closes, every secret and the host-sync credential die.
    const revoked = await admin('revoke-all', tenant.tenant_id);
    for (const s of live) expect(await s.closed(1000)).toBe(4401);
    expect((await me(stack.gatewayUrl, newToken)).status).toBe(401);
    const stale = await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret);
    expect(await stale.text()).toBe(UNAUTHORIZED_FETCH);
    const fresh = await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, revoked.host_sync_client_secret as string);
    expect(fresh.status).toBe(200);
    const newest = ((await fresh.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    expect((await me(stack.gatewayUrl, await signWithJose(newest, tenant.tenant_id, randomUUID()))).status).toBe(200);
  });

  it('no secret or token reached any log line', () => {
    const logs = stack.allLogs();
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of [firstSecret, tenant.host_sync_client_secret, stack.adminToken, stack.internalToken, stack.secretsKey]) {
      expect(logs).not.toContain(secret);
    }
    expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./);
  });
});
