import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import { createLogger, listen } from '@service-relay/core';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { createRestHandler } from './http/rest-api';
import { MemoryMessageBus } from './messaging/memory-message-bus';
import { createRealtimeMetrics } from './metrics';
import { fakeConnection } from './test-support/fake-connection';
import { gatewayHeaders, TEST_INTERNAL_TOKEN, topicFor } from './test-support/realtime-harness';

describe('the publish gate (acceptingPublishes)', () => {
  const identity: VerifiedIdentity = { tenantId: randomUUID(), userId: randomUUID(), expiresAt: Math.floor(Date.now() / 1000) + 3600, keySlot: 'primary', keyVersion: 1 };
  const ref = { tenantId: identity.tenantId, channel: 'gated' };
  const logger = createLogger({ service: 'realtime-test', level: 'silent' });
  const metrics = createRealtimeMetrics();
  let accepting = false;
  const messages = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 });
  const stored = async () => (await messages.history(ref, { limit: 10 })).messages.length;
  let server: Server;
  let base: string;

  beforeAll(async () => {
    server = createServer(createRestHandler({ acceptedInternalTokens: TEST_INTERNAL_TOKEN, messages, metrics, logger, acceptingPublishes: () => accepting }));
    base = `http://127.0.0.1:${await listen(server, 0, '127.0.0.1')}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('refuses a REST publish with 503 unavailable while closed, and stores nothing', async () => {
    const publish = () =>
      fetch(`${base}/api/v1/channels/gated/messages`, { method: 'POST', body: '{"data":1}', headers: { ...gatewayHeaders(identity), 'content-type': 'application/json' } });
    accepting = false;
    const res = await publish();
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ errors: ['unavailable'] });
    expect(await stored()).toBe(0);
    accepting = true;
    expect((await publish()).status).toBe(201);
    expect(await stored()).toBe(1);
    accepting = false;
  });

  it('refuses a WebSocket publish with an unavailable error frame while closed, and stores nothing', async () => {
    const bus = new MemoryMessageBus({ maxMessages: 10, ttlS: 60 });
    const { socket, conn } = fakeConnection({ identity, context: { messages: bus, acceptingPublishes: () => accepting } });
    const reply = async (frame: Record<string, unknown>) => {
      const before = socket.sent.length;
      conn.onFrame(JSON.stringify(frame));
      while (socket.sent.length === before) await new Promise((r) => setImmediate(r));
      return socket.sent[socket.sent.length - 1];
    };
    const topic = topicFor(identity.tenantId, 'gated');
    accepting = false;
    expect(await reply({ type: 'publish', topic, data: 1, ref: 1 })).toEqual({ type: 'error', code: 'unavailable', ref: 1 });
    expect((await bus.history(ref, { limit: 10 })).messages).toEqual([]);
    accepting = true;
    expect(await reply({ type: 'publish', topic, data: 1, ref: 2 })).toMatchObject({ type: 'published', ref: 2 });
    expect((await bus.history(ref, { limit: 10 })).messages).toHaveLength(1);
    conn.close(1000, 'done');
  });
});
