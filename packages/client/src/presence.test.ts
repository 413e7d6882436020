import { randomUUID } from 'node:crypto';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
import { createRelayClient, RelayClientError, type RelayClient } from './index.js';
import { EventRecorder } from './testing/event-recorder.js';
import { readyFrame, StubRelay } from './testing/stub-relay.js';

const TENANT = '00000000-0000-4000-8000-000000000001';
const topic = (channel: string) => `tenants/${TENANT}/channels/${channel}`;

// The client's half of presence, against a scripted server speaking the
// presence frames (request/answer, join, leave, subscribe's member).
describe('RelayClient presence frames', () => {
  const clients: RelayClient[] = [];
  const stubs: StubRelay[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await Promise.all(stubs.splice(0).map((s) => s.stop()));
  });

  const start = async (echoRef: boolean) => {
    const stub = await StubRelay.start((peer) => {
      peer.send(readyFrame());
      peer.ws.on('message', (d) => {
        const f = JSON.parse(String(d)) as { type: string; topic: string; ref?: string; member?: unknown };
        if (f.type === 'subscribe') {
          peer.send({ type: 'subscribed', topic: f.topic, epoch: '', ref: f.ref });
          peer.send({ type: 'join', topic: f.topic, member: { user_id: 'u-self', ...(f.member !== undefined && { data: f.member }) } });
        }
        if (f.type === 'presence') {
          peer.send({ type: 'presence', topic: f.topic, members: [{ user_id: 'u-1', data: { name: 'Ada' } }, { user_id: 'u-2' }], ...(echoRef && { ref: f.ref }) });
        }
      });
    });
    stubs.push(stub);
    const client = createRelayClient({ url: stub.url, WebSocket, getToken: async () => 't', reconnect: { initialDelayMs: 20, maxDelayMs: 100 } });
    clients.push(client);
    return { stub, client, events: new EventRecorder(client) };
  };

  it('presence() resolves with the members; subscribe sends member; join and leave are events with the channel', async () => {
    const { stub, client, events } = await start(true);
    await client.subscribe('room', { member: { name: 'Grace' } });
    const peer = await stub.peer(0);
    expect(await peer.next('subscribe')).toMatchObject({ topic: topic('room'), member: { name: 'Grace' } });
    expect(await events.next('join')).toEqual({ channel: 'room', topic: topic('room'), member: { user_id: 'u-self', data: { name: 'Grace' } } });
    expect(await client.presence('room')).toEqual([{ user_id: 'u-1', data: { name: 'Ada' } }, { user_id: 'u-2' }]);
    peer.send({ type: 'leave', topic: topic('room'), member: { user_id: 'u-2' } });
    expect(await events.next('leave')).toEqual({ channel: 'room', topic: topic('room'), member: { user_id: 'u-2' } });
  });

  it('an answer without ref settles the oldest presence request on that channel', async () => {
    const { client } = await start(false);
    const [a, b] = await Promise.all([client.presence('room'), client.presence('room')]);
    expect(a).toHaveLength(2);
    expect(b).toHaveLength(2);
  });

  it('a resubscribe after a reconnect sends member again', async () => {
    const { stub, client } = await start(true);
    await client.subscribe('room', { member: { name: 'Grace' } });
    const first = await stub.peer(0);
    first.ws.terminate();
    const second = await stub.peer(1);
    expect(await second.next('subscribe')).toMatchObject({ topic: topic('room'), member: { name: 'Grace' }, after: '0-0' });
  });
});

// Against realtime's presence (the default channel rules give `presence:*` channels presence).
describe('RelayClient presence against realtime', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const clients: RelayClient[] = [];
  const tenantId = randomUUID();
  const make = (userId: string) => {
    const client = createRelayClient({ url: rt.ws, WebSocket, getToken: async () => issueToken(verifier, { tenantId, userId }).token, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
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

  it('subscribe with member joins; presence() lists; others see join and leave', async () => {
    const [low, high] = ['00000000-0000-4000-8000-00000000000a', 'ffffffff-0000-4000-8000-00000000000a'];
    const alice = make(high);
    const bob = make(low);
    await alice.client.subscribe('presence:lobby', { member: { name: 'Alice' } });
    expect(await alice.events.next('join', (j) => j.member.user_id === high)).toEqual({ channel: 'presence:lobby', topic: `tenants/${tenantId}/channels/presence:lobby`, member: { user_id: high, data: { name: 'Alice' } } });
    await bob.client.subscribe('presence:lobby');
    await alice.events.next('join', (j) => j.member.user_id === low);
    expect(await bob.client.presence('presence:lobby')).toEqual([{ user_id: low }, { user_id: high, data: { name: 'Alice' } }]);
    await bob.client.unsubscribe('presence:lobby');
    expect(await alice.events.next('leave', (l) => l.member.user_id === low)).toMatchObject({ channel: 'presence:lobby', member: { user_id: low } });
    expect(await alice.client.presence('presence:lobby')).toEqual([{ user_id: high, data: { name: 'Alice' } }]);
  });

  it('a channel without presence: presence() rejects with presence_not_enabled', async () => {
    const { client } = make(randomUUID());
    const err = await client.presence('general').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RelayClientError);
    expect((err as RelayClientError).code).toBe('presence_not_enabled');
  });

  it('a member that reconnects joins again with the same data', async () => {
    const watcher = make(randomUUID());
    const userId = randomUUID();
    const member = make(userId);
    await watcher.client.subscribe('presence:room');
    await member.client.subscribe('presence:room', { member: { name: 'Grace' } });
    await watcher.events.next('join', (j) => j.member.user_id === userId);
    // The instance stops and comes back on its port: both reconnect, the member joins again.
    const port = rt.server.port;
    await rt.stop();
    rt = await startRealtime({ verifier, env: { REALTIME_PORT: String(port) } });
    await watcher.events.next('subscribed', (s) => s.resubscribed, 10_000);
    await member.events.next('subscribed', (s) => s.resubscribed, 10_000);
    expect(await watcher.client.presence('presence:room')).toContainEqual({ user_id: userId, data: { name: 'Grace' } });
  });
});
