import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from './support/stack';
import { createTenantWithSecret, me, signWithJose, type CreatedTenant } from './support/host';
import { TestSocket } from './support/ws-client';

/** Polls until `probe` is true: recovery is the services reconnecting on their own, there is no event to await. */
async function eventually(probe: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('auth fails closed while the verifier is down, and recovers on its own', () => {
  let stack: Stack;
  let tenant: CreatedTenant;
  let secret: string;

  beforeAll(async () => {
    stack = await startStack();
    ({ tenant, secret } = await createTenantWithSecret(stack));
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('answers 503 auth_unavailable (never 401, never 200) and refuses new sockets with 503, then recovers', async () => {
    // verifier1 serves the gateway and realtime1.
    expect((await me(stack.gatewayUrl, await signWithJose(secret, tenant.tenant_id, randomUUID()))).status).toBe(200);
    await stack.processes.verifier1!.stop('SIGKILL');

    const fresh = await signWithJose(secret, tenant.tenant_id, randomUUID());
    const res = await me(stack.gatewayUrl, fresh);
    expect(res.status).toBe(503);
    expect(await res.text()).toBe('{"errors":["auth_unavailable"]}');
    await expect(TestSocket.open(stack.realtimeWs[0]!, fresh)).rejects.toMatchObject({ status: 503, body: '{"errors":["auth_unavailable"]}' });
    // A bad token is not let through either, and not called invalid while nobody can judge it.
    const forged = await signWithJose('y'.repeat(43), tenant.tenant_id, randomUUID());
    expect((await me(stack.gatewayUrl, forged)).status).toBe(503);
    // realtime2 has its own verifier and keeps serving.
    const other = await TestSocket.open(stack.realtimeWs[1]!, fresh);
    other.close();

    await stack.restart('verifier1');
    await eventually(async () => (await me(stack.gatewayUrl, fresh)).status === 200);
    await eventually(async () => {
      try {
        (await TestSocket.open(stack.realtimeWs[0]!, fresh)).close();
        return true;
      } catch {
        return false;
      }
    });
    expect((await me(stack.gatewayUrl, forged)).status).toBe(401);
  });
});
