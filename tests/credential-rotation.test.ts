import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createTenantWithSecret, fetchSecret, signWithJose, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

// Rotating INTERNAL_TOKEN with no request failing (#33 item 2), the
// runbook of docs/OPERATIONS.md "Rotating INTERNAL_TOKEN" as written:
//   step 1: every service gets INTERNAL_TOKEN_NEXT=<new> (sends old, accepts both);
//   step 2: every service gets INTERNAL_TOKEN=<new>, INTERNAL_TOKEN_NEXT=<old> (sends new, accepts both);
//   step 3: INTERNAL_TOKEN_NEXT is removed (the old value is refused).
// The stack starts in the middle of step 2, the state where a roll mixes the
// most: registry, verifier1 and realtime1 already send the new value;
// verifier2, realtime2 and the gateway still send the old one. Every hop
// between services is then driven by a client-visible action, and realtime2
// is rolled to step 3.
describe('credentials rotated with no call refused: INTERNAL_TOKEN service by service, a host-sync secret with an overlap (#33)', () => {
  const oldToken = randomBytes(32).toString('base64url');
  const newToken = randomBytes(32).toString('base64url');
  const step1 = { INTERNAL_TOKEN: oldToken, INTERNAL_TOKEN_NEXT: newToken };
  const step2 = { INTERNAL_TOKEN: newToken, INTERNAL_TOKEN_NEXT: oldToken };
  let stack: Stack;
  let tenant: CreatedTenant;
  let secret: string;
  const sockets: TestSocket[] = [];
  const startedAt = Date.now();

  beforeAll(async () => {
    stack = await startStack({
      serviceEnv: { registry: step2, verifier1: step2, realtime1: step2, verifier2: step1, realtime2: step1, gateway: step1 },
      realtimeEnv: { USAGE_FLUSH_INTERVAL_S: '1' },
    });
    ({ tenant, secret } = await createTenantWithSecret(stack));
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await stack?.stop();
  });

  const topic = (channel: string) => `tenants/${tenant.tenant_id}/channels/${channel}`;
  const sign = () => signWithJose(secret, tenant.tenant_id, randomUUID());
  const open = async (instance: number, token?: string) => {
    const s = await TestSocket.open(stack.realtimeWs[instance]!, token ?? (await sign()));
    sockets.push(s);
    s.send({ type: 'subscribe', topic: topic('ops'), ref: 'sub' });
    expect(await s.next((f) => f.ref === 'sub')).toMatchObject({ type: 'subscribed' });
    return s;
  };
  const internalCall = (instance: 0 | 1, token: string) =>
    fetch(`${stack.realtimeWs[instance]!.replace('ws://', 'http://').replace(/\/ws$/, '')}/internal/server/channels/ops/presence`, {
      headers: { 'x-internal-token': token, 'x-relay-server': '1', 'x-relay-tenant-id': tenant.tenant_id },
    });

  it('mid-roll, every hop carries traffic: gateway→registry, gateway→verifier, gateway→realtime, realtime→verifier, verifier→registry, registry→realtime, the feed and the usage flush', async () => {
    // gateway (old) → registry (accepts both): the host-sync fetch.
    expect((await fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, tenant.host_sync_client_secret)).status).toBe(200);
    // gateway (old) → verifier1 (accepts both) → registry (new) for the tenant's keys.
    const token = await sign();
    expect((await fetch(`${stack.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // realtime1 (new) → verifier1, realtime2 (old) → verifier2 (old) → registry: upgrades on both instances.
    const one = await open(0);
    const two = await open(1);
    // gateway (old) → realtime1 (accepts both): a REST publish, fanned out to both instances.
    const rest = await fetch(`${stack.gatewayUrl}/api/v1/channels/ops/messages`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"data":"via rest"}' });
    expect(rest.status).toBe(201);
    // registry (new) → realtime2 (accepts both): the host server API.
    const host = await fetch(`${stack.gatewayUrl}/api/host/tenants/${tenant.tenant_id}/messages`, {
      method: 'POST',
      headers: { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret), 'content-type': 'application/json' },
      body: JSON.stringify({ channels: ['ops'], data: 'via host' }),
    });
    expect(host.status).toBe(201);
    for (const s of [one, two]) {
      expect(await s.next((f) => f.type === 'message' && f.data === 'via rest')).toMatchObject({ topic: topic('ops') });
      expect(await s.next((f) => f.type === 'message' && f.data === 'via host')).toMatchObject({ topic: topic('ops') });
    }
    // realtime1 (new) and realtime2 (old) → registry: both instances' usage flushes land (the flush is on a 1 s timer: polled, bounded).
    let deliveries = 0;
    for (let i = 0; i < 100 && deliveries < 4 && Date.now() - startedAt < 50_000; i++) {
      const res = await fetch(`${stack.registryUrl}/admin/tenants/${tenant.tenant_id}/usage?from=${new Date(startedAt - 3_600_000).toISOString()}`, { headers: { authorization: `Bearer ${stack.adminToken}` } });
      deliveries = ((await res.json()) as { totals: { deliveries: number } }).totals.deliveries;
      if (deliveries < 4) await new Promise((r) => setTimeout(r, 100));
    }
    expect(deliveries, 'deliveries counted by both instances').toBe(4);
    // Every consumer (old and new senders alike) → registry's feed: a disable answers 200 only when all six hold it.
    const disabled = await fetch(`${stack.registryUrl}/admin/tenants/${tenant.tenant_id}/disable`, { method: 'POST', headers: { authorization: `Bearer ${stack.adminToken}` } });
    expect(disabled.status, await disabled.clone().text()).toBe(200);
    expect((await fetch(`${stack.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
    expect(await one.closed()).toBe(4401);
    expect(await two.closed()).toBe(4401);
    const enabled = await fetch(`${stack.registryUrl}/admin/tenants/${tenant.tenant_id}/enable`, { method: 'POST', headers: { authorization: `Bearer ${stack.adminToken}` } });
    expect(enabled.status).toBe(200);
  });

  it('both values are accepted mid-roll; after step 3 on realtime2 the old one is refused there and traffic still flows', async () => {
    for (const t of [oldToken, newToken]) expect((await internalCall(1, t)).status).toBe(200);
    expect((await internalCall(1, randomBytes(32).toString('base64url'))).status).toBe(401);
    const realtime2 = stack.processes.realtime2!;
    await realtime2.stop();
    realtime2.setEnv({ INTERNAL_TOKEN: newToken, INTERNAL_TOKEN_NEXT: undefined });
    await stack.restart('realtime2');
    const refused = await internalCall(1, oldToken);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ errors: ['invalid_internal_token'] });
    expect((await internalCall(1, newToken)).status).toBe(200);
    // realtime2 (now new only) still upgrades through verifier2 (accepts both) and takes the registry's (new) host publishes.
    const s = await open(1);
    const host = await fetch(`${stack.gatewayUrl}/api/host/tenants/${tenant.tenant_id}/messages`, {
      method: 'POST',
      headers: { authorization: basic(tenant.host_sync_client_id, tenant.host_sync_client_secret), 'content-type': 'application/json' },
      body: JSON.stringify({ channels: ['ops'], data: 'after step 3' }),
    });
    expect(host.status).toBe(201);
    expect(await s.next((f) => f.type === 'message' && f.data === 'after step 3')).toMatchObject({ topic: topic('ops') });
  });

  it('a host-sync credential rotated as OPERATIONS "Rotating a host-sync credential" says: both secrets work until expire-previous-host-sync, then only the new one', async () => {
    const fetchWith = (secret: string) => fetchSecret(stack.gatewayUrl, tenant.tenant_id, tenant.host_sync_client_id, secret);
    const hostApi = (secret: string) =>
      fetch(`${stack.gatewayUrl}/api/host/tenants/${tenant.tenant_id}/channels/ops/presence`, { headers: { authorization: basic(tenant.host_sync_client_id, secret) } });
    const old = tenant.host_sync_client_secret;
    const rotated = await stack.admin('rotate-host-sync', tenant.tenant_id, '--keep-previous');
    expect(rotated.code, rotated.stderr).toBe(0);
    const view = JSON.parse(rotated.stdout) as { host_sync_client_secret: string; has_previous_host_sync: boolean };
    expect(view.has_previous_host_sync).toBe(true);
    const fresh = view.host_sync_client_secret;
    for (const secret of [old, fresh]) {
      expect((await fetchWith(secret)).status).toBe(200);
      expect((await hostApi(secret)).status).toBe(200);
    }
    const expired = await stack.admin('expire-previous-host-sync', tenant.tenant_id);
    expect(expired.code, expired.stderr).toBe(0);
    const refused = await fetchWith(old);
    expect(refused.status).toBe(401);
    expect(await refused.text()).toBe('{"errors":["invalid_host_sync_credentials"]}');
    expect((await hostApi(old)).status).toBe(401);
    expect((await fetchWith(fresh)).status).toBe(200);
    expect((await hostApi(fresh)).status).toBe(200);
    tenant.host_sync_client_secret = fresh;
  });

  it('no token of either value reached a log', () => {
    const logs = stack.allLogs();
    expect(logs).not.toContain(oldToken);
    expect(logs).not.toContain(newToken);
    expect(logs).not.toContain(secret);
  });
});
