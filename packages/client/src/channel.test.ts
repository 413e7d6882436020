import { randomUUID } from 'node:crypto';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { issueToken, startRealtime, type RealtimeInstance } from '../../../services/realtime/src/test-support/realtime-harness';
import { createRelayClient, type ChannelEvents, type RelayChannel, type RelayClient, type RelayClientOptions } from './index.js';
import { readyFrame, StubRelay } from './testing/stub-relay.js';

/** Every event of one channel object, in order. */
function record(ch: RelayChannel): { type: keyof ChannelEvents; payload: unknown }[] {
  const seen: { type: keyof ChannelEvents; payload: unknown }[] = [];
  for (const type of ['message', 'presence', 'state', 'subscribed', 'gap', 'error'] as const) ch.on(type, (payload) => seen.push({ type, payload }));
  return seen;
}

async function until(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

// The per-channel objects against a real realtime instance.
describe('channel objects', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const clients: RelayClient[] = [];
  const tenantId = randomUUID();
  const make = (userId = randomUUID(), opts: Partial<RelayClientOptions> = {}) => {
    const client = createRelayClient({ url: rt.ws, WebSocket, getToken: async () => issueToken(verifier, { tenantId, userId }).token, reconnect: { initialDelayMs: 20, maxDelayMs: 200 }, ...opts });
    clients.push(client);
    return client;
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

  it('each channel gets only its own messages; the client-wide message event still sees both', async () => {
    const client = make();
    const orders = client.channel('orders');
    const news = client.channel('news');
    expect(client.channel('orders')).toBe(orders);
    const o = record(orders);
    const n = record(news);
    const all: string[] = [];
    client.on('message', (m) => all.push(`${m.channel}:${String(m.data)}`));
    expect(orders.state).toBe('unsubscribed');
    const sub = await orders.subscribe();
    expect(orders.state).toBe('subscribed');
    expect(orders.subscription).toEqual(sub);
    await news.subscribe();
    await orders.publish('o1');
    await news.publish('n1');
    await orders.publish('o2');
    await until(() => all.length === 3, 'three messages');
    expect(all).toEqual(['orders:o1', 'news:n1', 'orders:o2']);
    expect(o.filter((e) => e.type === 'message').map((e) => (e.payload as { data: unknown }).data)).toEqual(['o1', 'o2']);
    expect(n.filter((e) => e.type === 'message').map((e) => (e.payload as { data: unknown }).data)).toEqual(['n1']);
    expect(o.filter((e) => e.type === 'state').map((e) => e.payload)).toEqual(['subscribing', 'subscribed']);

    await orders.unsubscribe();
    expect(orders.state).toBe('unsubscribed');
    expect(orders.subscription).toBeUndefined();
    await news.publish('n2');
    await make().channel('orders').publish('o3');
    await until(() => all.length === 4, 'the fourth message');
    expect(all.at(-1)).toBe('news:n2');
    expect(o.filter((e) => e.type === 'message')).toHaveLength(2);
  });

  it('presence events (join, leave) arrive on the channel object', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    const alice = make(a).channel('presence:room');
    const seen = record(alice);
    await alice.subscribe({ member: { name: 'Alice' } });
    const bob = make(b).channel('presence:room');
    await bob.subscribe({ member: { name: 'Bob' } });
    await until(() => seen.some((e) => e.type === 'presence' && (e.payload as { member: { user_id: string } }).member.user_id === b), "bob's join");
    expect(seen.find((e) => e.type === 'presence' && (e.payload as { member: { user_id: string } }).member.user_id === b)?.payload).toEqual({ action: 'join', member: { user_id: b, data: { name: 'Bob' } } });
    expect((await alice.presence()).map((m) => m.user_id).sort()).toEqual([a, b].sort());
    await bob.unsubscribe();
    await until(() => seen.some((e) => e.type === 'presence' && (e.payload as { action: string }).action === 'leave'), "bob's leave");
  });

  it('a channel object made after subscribe() follows that subscription; a refused subscribe is its error event', async () => {
    const client = make(randomUUID());
    await client.subscribe('late');
    const late = client.channel('late');
    expect(late.state).toBe('subscribed');
    expect(late.subscription?.channel).toBe('late');
    // Another tenant's topic is not a channel name this client can ask for; a bad name is refused by the server.
    const bad = client.channel('bad name');
    await expect(bad.subscribe()).rejects.toMatchObject({ code: 'invalid_topic' });
    expect(bad.state).toBe('unsubscribed');
  });

  it('a publish carries an idempotency key by default: a retried publish with the same key stores one message', async () => {
    const client = make();
    const ch = client.channel('keyed');
    const seen = record(ch);
    await ch.subscribe();
    const first = await ch.publish({ n: 1 }, { idempotencyKey: 'order-17' });
    const again = await ch.publish({ n: 1 }, { idempotencyKey: 'order-17' });
    expect(again.id).toBe(first.id);
    const a = await ch.publish({ n: 2 });
    const b = await ch.publish({ n: 2 });
    expect(a.id).not.toBe(b.id);
    await until(() => seen.filter((e) => e.type === 'message').length === 3, 'three messages');
  });
});

describe('the SDK resends a keyed publish whose connection dropped', () => {
  let stub: StubRelay;
  const clients: RelayClient[] = [];
  beforeAll(async () => {
    // Connection 0 swallows the publish and dies; connection 1 answers it.
    stub = await StubRelay.start((peer, index) => {
      peer.send(readyFrame());
      peer.ws.on('message', (d) => {
        const f = JSON.parse(String(d)) as { type: string; ref?: string };
        if (f.type !== 'publish') return;
        if (index === 0) peer.ws.terminate();
        else peer.send({ type: 'published', topic: 't', id: '1-0', ref: f.ref });
      });
    });
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await stub.stop();
  });

  it('the same key on both connections, and one answer', async () => {
    const client = createRelayClient({ url: stub.url, WebSocket, getToken: async () => 't', reconnect: { initialDelayMs: 10, maxDelayMs: 20 } });
    clients.push(client);
    await client.connect();
    expect(await client.channel('x').publish('hello')).toEqual({ id: '1-0' });
    const [first, second] = [stub.peers[0]!.frames, stub.peers[1]!.frames].map((fs) => fs.find((f) => f.type === 'publish')!);
    expect(first!.idempotency_key).toMatch(/^[A-Za-z0-9_.:-]{1,128}$/);
    expect(second!.idempotency_key).toBe(first!.idempotency_key);
  });
});

describe('history over REST', () => {
  it('asks the gateway origin with the current token, after and epoch, and maps the answer', async () => {
    const calls: { url: string; auth: string | null }[] = [];
    const fetchStub = (async (url: string, init: RequestInit) => {
      calls.push({ url, auth: new Headers(init.headers).get('authorization') });
      const body = { messages: [{ id: '5-0', channel: 'feed', user_id: null, from: 'server', data: { a: 1 }, created_at: '2030-01-01T00:00:00.000Z' }], epoch: 'e1', recovered: false, reason: 'too_old' };
      return new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
    }) as unknown as typeof fetch;
    const token = `h.${btoa(JSON.stringify({ tenant_id: 't1' })).replace(/=+$/, '')}.s`;
    const client = createRelayClient({ url: 'wss://relay.example.com/ws', WebSocket, getToken: async () => token, fetch: fetchStub });
    const page = await client.channel('feed').history({ after: '4-0', epoch: 'e0', limit: 10 });
    expect(calls).toEqual([{ url: 'https://relay.example.com/api/v1/channels/feed/messages?after=4-0&epoch=e0&limit=10', auth: `Bearer ${token}` }]);
    expect(page).toEqual({ channel: 'feed', epoch: 'e1', recovered: false, reason: 'too_old', messages: [{ channel: 'feed', topic: 'tenants/t1/channels/feed', id: '5-0', userId: null, from: 'server', data: { a: 1 }, createdAt: '2030-01-01T00:00:00.000Z' }] });
    client.close();
  });

  it('a refusal is a RelayClientError with the server code', async () => {
    const fetchStub = (async () => new Response('{"errors":["forbidden_channel"]}', { status: 403 })) as unknown as typeof fetch;
    const client = createRelayClient({ url: 'ws://127.0.0.1:1/ws', WebSocket, getToken: async () => 'a.b.c', fetch: fetchStub });
    await expect(client.history('secret')).rejects.toMatchObject({ name: 'RelayClientError', code: 'forbidden_channel', details: { frame: 'history', topic: 'secret' } });
    client.close();
  });
});
