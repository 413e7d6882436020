import { randomUUID } from 'node:crypto';
import { FakeVerifier, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, startOnRedis, stopOnRedis, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
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
});
