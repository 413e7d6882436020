import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHostClient, type HostClient } from '@service-relay/host';
import { startStack, type Stack } from './support/stack';
import { me, type CreatedTenant } from './support/host';

const PYTHON_HOST = 'examples/python-host/host.py';

/** Runs the Python example as a host would: Debian's python3 with python3-jwt. */
function pythonHost(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('/usr/bin/python3', [PYTHON_HOST, ...args], { env: { PATH: process.env.PATH ?? '', ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout: stdout.trim(), stderr });
    });
  });
}

// The host side of #14 over the distributed deployment: every service its own process.
describe('host servers against the whole stack', () => {
  let stack: Stack;
  let tenant: CreatedTenant;
  let client: HostClient | undefined;
  const admin = async (...args: string[]) => {
    const r = await stack.admin(...args);
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as Record<string, unknown>;
  };
  const hostEnv = () => ({
    RELAY_URL: stack.gatewayUrl,
    TENANT_ID: tenant.tenant_id,
    HOST_SYNC_CLIENT_ID: tenant.host_sync_client_id,
    HOST_SYNC_CLIENT_SECRET: tenant.host_sync_client_secret,
  });

  beforeAll(async () => {
    stack = await startStack();
    tenant = (await admin('create-tenant')) as unknown as CreatedTenant;
  });
  afterAll(async () => {
    client?.close();
    await stack?.stop();
  });

  it('the Python example fetches the secret through the gateway and its token is served on GET /api/v1/me', async () => {
    const userId = randomUUID();
    const r = await pythonHost(hostEnv(), userId, '300');
    expect(r.code, r.stderr).toBe(0);
    const res = await me(stack.gatewayUrl, r.stdout);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { tenant_id: string; user_id: string; expires_at: number };
    expect(body).toMatchObject({ tenant_id: tenant.tenant_id, user_id: userId });
    expect(body.expires_at - Math.floor(Date.now() / 1000)).toBeGreaterThan(290);
  });

  it('the Python example says invalid_credentials for a wrong host-sync secret and prints no secret', async () => {
    const wrong = `wrong-${randomUUID()}`;
    const r = await pythonHost({ ...hostEnv(), HOST_SYNC_CLIENT_SECRET: wrong }, randomUUID());
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^invalid_credentials: /);
    expect(r.stderr).not.toContain(wrong);
  });

  it('a host on @service-relay/host rides a planned rotation: old and new tokens both served until expire_previous, then only the new', async () => {
    client = createHostClient({
      baseUrl: stack.gatewayUrl,
      tenantId: tenant.tenant_id,
      clientId: tenant.host_sync_client_id,
      clientSecret: tenant.host_sync_client_secret,
      refreshIntervalMs: 0,
    });
    const userId = randomUUID();
    const before = await client.signUserToken(userId, { ttlSeconds: 600 });
    expect((await me(stack.gatewayUrl, before)).status).toBe(200);

    await admin('rotate-secret', tenant.tenant_id);
    // A host that has not refreshed yet still signs with the old secret: served as previous.
    const stale = await client.signUserToken(userId, { ttlSeconds: 600 });
    expect((await me(stack.gatewayUrl, stale)).status).toBe(200);

    // The gateway passes the registry's ETag (the primary key version) through.
    expect(await client.refresh()).toEqual({ changed: true, etag: '"k2"' });
    const after = await client.signUserToken(userId, { ttlSeconds: 600 });
    const fromPython = await pythonHost(hostEnv(), userId);
    for (const token of [before, after, fromPython.stdout]) expect((await me(stack.gatewayUrl, token)).status).toBe(200);

    await admin('expire-previous', tenant.tenant_id);
    expect((await me(stack.gatewayUrl, before)).status).toBe(401);
    expect((await me(stack.gatewayUrl, stale)).status).toBe(401);
    expect((await me(stack.gatewayUrl, after)).status).toBe(200);
    expect((await me(stack.gatewayUrl, fromPython.stdout)).status).toBe(200);
  });

  it('a cap passed to signUserToken is enforced by the stack: history allowed, publish forbidden_channel', async () => {
    const c = createHostClient({ baseUrl: stack.gatewayUrl, tenantId: tenant.tenant_id, clientId: tenant.host_sync_client_id, clientSecret: tenant.host_sync_client_secret, refreshIntervalMs: 0 });
    const token = await c.signUserToken(randomUUID(), { ttlSeconds: 300, cap: { lobby: ['history'] } });
    const auth = { authorization: `Bearer ${token}` };
    expect((await fetch(`${stack.gatewayUrl}/api/v1/channels/lobby/messages?limit=1`, { headers: auth })).status).toBe(200);
    const publish = await fetch(`${stack.gatewayUrl}/api/v1/channels/lobby/messages`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"data":1}' });
    expect(publish.status).toBe(403);
    expect(await publish.json()).toEqual({ errors: ['forbidden_channel'] });
  });

  it('through the gateway a wrong host-sync secret is invalid_credentials', async () => {
    const c = createHostClient({ baseUrl: stack.gatewayUrl, tenantId: tenant.tenant_id, clientId: tenant.host_sync_client_id, clientSecret: 'nope', refreshIntervalMs: 0 });
    await expect(c.refresh()).rejects.toMatchObject({ name: 'HostClientError', code: 'invalid_credentials', status: 401 });
  });
});
