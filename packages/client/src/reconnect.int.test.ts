import { randomUUID } from 'node:crypto';
import { FakeVerifier, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startGatewayHarness } from '../../../services/edge-gateway/src/testing/gateway-harness';
import { issueToken, startRealtime, startOnRedis, stopOnRedis, TEST_INTERNAL_TOKEN, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
import { WsTestClient } from '../../../services/realtime/src/test-support/ws-test-client';
import { createRelayClient } from './index.js';
import { EventRecorder } from './testing/event-recorder.js';

// Two realtime instances on one Redis, as two processes would be: the
// client's instance stops, messages are published on the other while it is
// down, and it comes back on the same port.
describe('RelayClient across a realtime restart (Redis)', () => {
  const verifier = new FakeVerifier();
  const prefix = uniqueRedisPrefix('client');
  let instances: RealtimeInstance[];

  beforeAll(async () => {
    instances = await startOnRedis(2, verifier, prefix);
  });
  afterAll(async () => {
    await stopOnRedis(instances, verifier, prefix);
  });

  it('replays what was published while its instance was down, once: no gap, no duplicate', async () => {
    const tenantId = randomUUID();
    const [a, b] = instances as [RealtimeInstance, RealtimeInstance];
    const client = createRelayClient({
      url: a.ws,
      WebSocket,
      getToken: async () => issueToken(verifier, { tenantId }).token,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    const events = new EventRecorder(client);
    try {
      await client.subscribe('orders');
      // A message already seen, and one channel subscribed without any message yet.
      await client.subscribe('quiet');
      const seen = await client.publish('orders', { n: 0 });
      await events.messages('orders', 1);

      const dropped = events.next('disconnected');
      const port = a.server.port;
      await a.stop();
      expect(await dropped).toMatchObject({ code: 1001, willReconnect: true });

      const publisher = await WsTestClient.connect(b.ws, issueToken(verifier, { tenantId }).token);
      const whileDown: string[] = [];
      for (let n = 1; n <= 5; n++) {
        const reply = await publisher.request({ type: 'publish', topic: `tenants/${tenantId}/channels/orders`, data: { n } });
        whileDown.push(reply.id as string);
      }
      const quiet = await publisher.request({ type: 'publish', topic: `tenants/${tenantId}/channels/quiet`, data: 'while down' });

      instances[0] = await startRealtime({ verifier, env: { REDIS_URL: a.config.redis.url!, REDIS_PREFIX: prefix, REALTIME_PORT: String(port) } });
      const resubscribed = await Promise.all([
        events.next('subscribed', (s) => s.resubscribed && s.channel === 'orders', 15_000),
        events.next('subscribed', (s) => s.resubscribed && s.channel === 'quiet', 15_000),
      ]);
      expect(resubscribed.map((s) => s.recovered)).toEqual([true, true]);

      const live = await publisher.request({ type: 'publish', topic: `tenants/${tenantId}/channels/orders`, data: { n: 6 } });
      const orders = await events.messages('orders', 7);
      expect(orders.map((m) => m.id)).toEqual([seen.id, ...whileDown, live.id as string]);
      expect(orders.map((m) => (m.data as { n: number }).n)).toEqual([0, 1, 2, 3, 4, 5, 6]);
      expect((await events.messages('quiet', 1)).map((m) => m.id)).toEqual([quiet.id]);
      expect(events.all('gap')).toEqual([]);
      await publisher.close();
    } finally {
      client.close();
    }
  });

  it('through the gateway in front of both instances: one of them stops, the client comes back through the gateway to the other, nothing missed or doubled', async () => {
    const tenantId = randomUUID();
    const [a, b] = instances as [RealtimeInstance, RealtimeInstance];
    const gateway = await startGatewayHarness({ verifier, env: { REALTIME_URL: `${a.http},${b.http}`, INTERNAL_TOKEN: TEST_INTERNAL_TOKEN } });
    const client = createRelayClient({
      url: `ws://127.0.0.1:${gateway.gateway.port}/ws`,
      WebSocket,
      getToken: async () => issueToken(verifier, { tenantId }).token,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
    });
    const events = new EventRecorder(client);
    try {
      await client.subscribe('feed');
      const first = await client.publish('feed', 1);
      await events.messages('feed', 1);
      // Whichever instance the gateway picked for this connection, stop it.
      const open = await Promise.all([a, b].map(async (rt) => (await rt.server.metrics.connections.get()).values[0]?.value ?? 0));
      const mine = open.indexOf(1);
      expect(mine).toBeGreaterThanOrEqual(0);
      const down = [a, b][mine]!;
      const other = [a, b][1 - mine]!;
      const port = down.server.port;
      const dropped = events.next('disconnected');
      await down.stop();
      expect(await dropped).toMatchObject({ code: 1001, willReconnect: true });
      // While it is down, the other instance takes a message and the gateway takes the client.
      const publisher = await WsTestClient.connect(other.ws, issueToken(verifier, { tenantId }).token);
      const missed = await publisher.request({ type: 'publish', topic: `tenants/${tenantId}/channels/feed`, data: 2 });
      expect(await events.next('subscribed', (s) => s.resubscribed, 15_000)).toMatchObject({ recovered: true });
      const after = await client.publish('feed', 3);
      const ids = (await events.messages('feed', 3)).map((m) => m.id);
      expect(ids).toEqual([first.id, missed.id as string, after.id]);
      await publisher.close();
      instances[mine] = await startRealtime({ verifier, env: { REDIS_URL: down.config.redis.url!, REDIS_PREFIX: prefix, REALTIME_PORT: String(port) } });
    } finally {
      client.close();
      await gateway.stop();
    }
  });
});
