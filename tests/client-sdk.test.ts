import { randomUUID } from 'node:crypto';
import { createRelayClient, type RelayClient } from '@service-relay/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createTenantWithSecret, signWithJose, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

// @service-relay/client (its dist/ build, as an app imports it) against the
// distributed deployment, every service its own process, through the
// gateway's /ws: short-lived tokens refreshed in place, the gateway's realtime
// instance stopped and started again with what was published meanwhile
// replayed once, and a disabled tenant ending the client for good.
describe('the client SDK against the whole stack, through the gateway', () => {
  let stack: Stack;
  let tenant: CreatedTenant;
  let secret: string;
  let client: RelayClient | undefined;

  beforeAll(async () => {
    stack = await startStack();
    ({ tenant, secret } = await createTenantWithSecret(stack));
  });
  afterAll(async () => {
    client?.close();
    await stack?.stop();
  });

  it('refreshes, survives a realtime restart without gap or duplicate, and stops when the tenant is disabled', async () => {
    const userId = randomUUID();
    let tokens = 0;
    const events: { type: string; payload: unknown }[] = [];
    let notify: () => void = () => {};
    const waitFor = async <T>(pick: () => T | undefined, what: string, timeoutMs = 30_000): Promise<T> => {
      const deadline = Date.now() + timeoutMs;
      for (let found = pick(); ; found = pick()) {
        if (found !== undefined) return found;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`${what} did not happen; events: ${JSON.stringify(events.slice(-8))}`);
        await new Promise<void>((resolve) => {
          notify = resolve;
          setTimeout(resolve, left).unref();
        });
      }
    };
    const c = createRelayClient({
      url: `${stack.gatewayUrl.replace(/^http/, 'ws')}/ws`,
      WebSocket,
      getToken: async () => {
        tokens++;
        return signWithJose(secret, tenant.tenant_id, userId, 6);
      },
      reconnect: { initialDelayMs: 100, maxDelayMs: 1000 },
    });
    client = c;
    for (const type of ['message', 'subscribed', 'gap', 'disconnected', 'token_refreshed', 'error', 'ready'] as const) {
      c.on(type, (payload) => {
        events.push({ type, payload });
        notify();
      });
    }
    const of = <T>(type: string) => events.filter((e) => e.type === type).map((e) => e.payload as T);
    const messages = () => of<{ channel: string; id: string; data: unknown }>('message').filter((m) => m.channel === 'orders');

    await c.subscribe('orders');
    const first = await c.publish('orders', 1);
    await waitFor(() => (messages().length >= 1 ? true : undefined), 'the first message');
    // A 6-second token is refreshed on the live connection (about every 3 s).
    await waitFor(() => of('token_refreshed')[0], 'a token refresh');

    // The gateway's only realtime instance stops: its clients get 1001 through the gateway.
    await stack.processes.realtime1!.stop();
    expect(await waitFor(() => of<{ code: number; willReconnect: boolean }>('disconnected')[0], 'the drop')).toMatchObject({ code: 1001, willReconnect: true });
    // Meanwhile the other instance takes messages on the same channel.
    const publisher = await TestSocket.open(stack.realtimeWs[1]!, await signWithJose(secret, tenant.tenant_id, randomUUID()), true);
    const whileDown: string[] = [];
    for (const n of [2, 3]) {
      publisher.send({ type: 'publish', topic: `tenants/${tenant.tenant_id}/channels/orders`, data: n, ref: `p${n}` });
      whileDown.push((await publisher.next((f) => f.ref === `p${n}`)).id as string);
    }
    await stack.restart('realtime1');
    await waitFor(() => of<{ resubscribed: boolean; recovered?: boolean }>('subscribed').find((s) => s.resubscribed), 'the resubscribe');
    const last = await c.publish('orders', 4);
    await waitFor(() => (messages().length >= 4 ? true : undefined), 'four messages');
    expect(messages().map((m) => m.id)).toEqual([first.id, ...whileDown, last.id]);
    expect(messages().map((m) => m.data)).toEqual([1, 2, 3, 4]);
    expect(of('gap')).toEqual([]);

    // The operator disables the tenant: 4401, and the fresh token is refused at the upgrade (401): the client stops.
    const disabled = await stack.admin('disable', tenant.tenant_id);
    expect(disabled.code, disabled.stderr).toBe(0);
    const error = await waitFor(() => of<{ code: string }>('error').find((e) => e.code === 'invalid_or_missing_token'), 'giving up');
    expect(error.code).toBe('invalid_or_missing_token');
    expect(c.state).toBe('closed');
    expect(of<{ code: number }>('disconnected').map((d) => d.code)).toContain(4401);
    expect(tokens).toBeGreaterThanOrEqual(4);
    publisher.close();
  });
});
