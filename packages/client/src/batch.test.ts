import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
import { WsTestClient } from '../../../services/realtime/src/test-support/ws-test-client';
import { createRelayClient, type RelayClient } from './index.js';
import { EventRecorder } from './testing/event-recorder.js';
import { readyFrame, StubRelay } from './testing/stub-relay.js';

const TENANT = '00000000-0000-4000-8000-000000000001';
const topic = (channel: string) => `tenants/${TENANT}/channels/${channel}`;
const message = (n: number) => ({ type: 'message', topic: topic('room'), id: `1-${n}`, user_id: 'u', data: n, created_at: '2026-01-01T00:00:00.000Z' });

// The client asks for compact batch frames (`batch=2`) and unpacks them: each
// frame inside is handled as if it had come alone, in order.
describe('RelayClient batch frames', () => {
  const clients: RelayClient[] = [];
  const stubs: StubRelay[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await Promise.all(stubs.splice(0).map((s) => s.stop()));
  });

  const start = async () => {
    const urls: string[] = [];
    const stub = await StubRelay.start((peer) => {
      urls.push(peer.url);
      peer.send(readyFrame());
      peer.ws.on('message', (d) => {
        const f = JSON.parse(String(d)) as { type: string; topic: string; ref?: string };
        if (f.type === 'subscribe') peer.send({ type: 'subscribed', topic: f.topic, epoch: 'e1', ref: f.ref });
      });
    });
    stubs.push(stub);
    const client = createRelayClient({ url: stub.url, WebSocket, getToken: async () => 't', reconnect: { initialDelayMs: 20, maxDelayMs: 100 } });
    clients.push(client);
    return { stub, client, urls, events: new EventRecorder(client) };
  };

  it('asks for batches and delivers every frame of one in order, messages and presence events alike', async () => {
    const { stub, client, urls, events } = await start();
    await client.subscribe('room');
    expect(urls[0]).toContain('batch=2');
    const peer = await stub.peer(0);
    peer.send({ type: 'batch', frames: [message(1), message(2), { type: 'join', topic: topic('room'), member: { user_id: 'u-2' } }, message(3)] });
    const got = await events.messages('room', 3);
    expect(got.map((m) => m.data)).toEqual([1, 2, 3]);
    expect(await events.next('join')).toMatchObject({ channel: 'room', member: { user_id: 'u-2' } });
    const order = events.entries.filter((e) => e.event === 'message' || e.event === 'join').map((e) => e.event);
    expect(order).toEqual(['message', 'message', 'join', 'message']);
  });

  it('unpacks a compact batch: its messages of the named topic come without type and topic, others whole', async () => {
    const { stub, client, events } = await start();
    await client.subscribe('room');
    await client.subscribe('other');
    const peer = await stub.peer(0);
    const members = ({ type: _type, topic: _topic, ...rest }: ReturnType<typeof message>) => rest;
    const elsewhere = { ...message(3), topic: topic('other') };
    peer.send({ type: 'batch', topic: topic('room'), frames: [members(message(1)), elsewhere, { type: 'join', topic: topic('room'), member: { user_id: 'u-2' } }, members(message(2))] });
    const got = await events.messages('room', 2);
    expect(got.map((m) => [m.data, m.id, m.userId, m.createdAt])).toEqual([
      [1, '1-1', 'u', '2026-01-01T00:00:00.000Z'],
      [2, '1-2', 'u', '2026-01-01T00:00:00.000Z'],
    ]);
    expect((await events.messages('other', 1)).map((m) => m.data)).toEqual([3]);
    expect(await events.next('join')).toMatchObject({ channel: 'room', member: { user_id: 'u-2' } });
    // Without a topic, a frame with no type is not a message.
    peer.send({ type: 'batch', frames: [members(message(4)), message(5)] });
    expect(await events.next('error')).toMatchObject({ code: 'protocol_error' });
    expect((await events.messages('room', 3)).map((m) => m.data)).toEqual([1, 2, 5]);
  });

  it('reports a batch that is not a list of frames as a protocol error and keeps the good frames', async () => {
    const { stub, client, events } = await start();
    await client.subscribe('room');
    const peer = await stub.peer(0);
    peer.send({ type: 'batch', frames: 'nope' });
    expect(await events.next('error')).toMatchObject({ code: 'protocol_error' });
    peer.send({ type: 'batch', frames: [message(1), 7, { type: 'batch', frames: [] }, message(2)] });
    expect((await events.messages('room', 2)).map((m) => m.data)).toEqual([1, 2]);
    expect(events.all('error').filter((e) => (e as { code?: string }).code === 'protocol_error')).toHaveLength(3);
  });
});

// The same against a running realtime: a burst read in one tick reaches the
// client in batch frames, and it delivers exactly what a client without
// batches gets frame by frame.
describe('RelayClient batch frames against a realtime instance', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('a burst of 50 publishes: every message once, in order, with the fields a plain subscriber sees', async () => {
    const tenantId = randomUUID();
    const token = () => issueToken(verifier, { tenantId }).token;
    // Records the raw frames the client receives, to see that batches were used.
    const raw: Array<{ type: string }> = [];
    class RecordingWebSocket extends WebSocket {
      constructor(url: string) {
        super(url);
        this.on('message', (d) => raw.push(JSON.parse(String(d)) as { type: string }));
      }
    }
    const client = createRelayClient({ url: rt.ws, WebSocket: RecordingWebSocket, getToken: async () => token() });
    const events = new EventRecorder(client);
    const plain = await WsTestClient.connect(rt.ws, token());
    const publisher = await WsTestClient.connect(rt.ws, token());
    try {
      await client.subscribe('burst');
      const topic = `tenants/${tenantId}/channels/burst`;
      expect(await plain.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
      // One TCP write: realtime reads the 50 publishes together, so their deliveries share a tick.
      const socket = (publisher.ws as unknown as { _socket: Socket })._socket;
      socket.cork();
      for (let i = 0; i < 50; i++) publisher.send({ type: 'publish', topic, data: i });
      socket.uncork();
      const viaPlain = await plain.waitForMessages(topic, 50);
      const got = await events.messages('burst', 50);
      expect(got.map((m) => m.data)).toEqual(Array.from({ length: 50 }, (_, i) => i));
      expect(got.map((m) => [m.id, m.userId, m.createdAt])).toEqual(viaPlain.map((m) => [m.id, m.user_id, m.created_at]));
      // Compact batches: the topic once, the messages of it without type and topic.
      const batches = raw.filter((f): f is { type: string; topic?: string; frames: Array<{ type?: string }> } => f.type === 'batch');
      expect(batches.length).toBeGreaterThan(0);
      expect(batches.every((b) => b.topic === topic && b.frames.every((inner) => inner.type === undefined))).toBe(true);
      expect(events.all('error')).toEqual([]);
    } finally {
      client.close();
      await Promise.all([plain.close(), publisher.close()]);
    }
  });
});
