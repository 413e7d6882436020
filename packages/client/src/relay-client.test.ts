import { randomUUID } from 'node:crypto';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, TEST_INTERNAL_TOKEN, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
import { createRelayClient, type RelayClient, type RelayClientOptions } from './index.js';
import { EventRecorder } from './testing/event-recorder.js';

describe('RelayClient against a realtime instance', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const clients: RelayClient[] = [];
  const tenantId = randomUUID();

  const make = (opts: Partial<RelayClientOptions> = {}, userId = randomUUID()) => {
    const client = createRelayClient({
      url: rt.ws,
      WebSocket,
      getToken: async () => issueToken(verifier, { tenantId, userId }).token,
      reconnect: { initialDelayMs: 20, maxDelayMs: 200 },
      ...opts,
    });
    clients.push(client);
    return { client, events: new EventRecorder(client) };
  };

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('connects, subscribes, publishes and delivers typed messages', async () => {
    const { client, events } = make();
    await client.connect();
    expect(client.state).toBe('open');
    expect(client.user).toMatchObject({ tenantId });
    const sub = await client.subscribe('general');
    expect(sub).toEqual({ channel: 'general', topic: `tenants/${tenantId}/channels/general`, epoch: expect.any(String), resubscribed: false });
    const { id } = await client.publish('general', { text: 'hi' });
    const [message] = await events.messages('general', 1);
    expect(message).toEqual({
      channel: 'general',
      topic: `tenants/${tenantId}/channels/general`,
      id,
      userId: client.user!.userId,
      from: 'user',
      data: { text: 'hi' },
      createdAt: expect.any(String),
    });
  });

  it('subscribes and publishes before connect() is called: the requests wait for the connection', async () => {
    const { client, events } = make();
    const queued = client.publish('early-publish', 1);
    await client.subscribe('early');
    expect(client.state).toBe('open');
    expect((await queued).id).toMatch(/^\d+-\d+$/);
    const { id } = await client.publish('early', 2);
    expect((await events.messages('early', 1)).map((m) => m.id)).toEqual([id]);
  });

  it('delivers a message the host server published as from "server" with a null userId', async () => {
    const { client, events } = make();
    await client.subscribe('announcements');
    const res = await fetch(`${rt.http}/internal/server/messages`, {
      method: 'POST',
      headers: { 'x-internal-token': TEST_INTERNAL_TOKEN, 'x-relay-server': '1', 'x-relay-tenant-id': tenantId, 'content-type': 'application/json' },
      body: JSON.stringify({ channels: ['announcements'], data: { text: 'maintenance at noon' } }),
    });
    expect(res.status).toBeLessThan(300);
    const [message] = await events.messages('announcements', 1);
    expect(message).toMatchObject({ channel: 'announcements', userId: null, from: 'server', data: { text: 'maintenance at noon' } });
  });

  it('is what the package exports from its build (dist/, made by npm ci through prepare)', async () => {
    const built = await import('@service-relay/client');
    expect(typeof built.createRelayClient).toBe('function');
    expect(built.SERVER_ERROR_CODES).toContain('forbidden_channel');
  });
});
