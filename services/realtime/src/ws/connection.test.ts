import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { FakeVerifier } from '@service-relay/testkit';
import { ManualScheduler } from '../timers/scheduler';
import { issueToken, startRealtime, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';

describe('WebSocket protocol', () => {
  const verifier = new FakeVerifier();
  const clock = new ManualScheduler(Date.now());
  let rt: RealtimeInstance;
  const clients: WsTestClient[] = [];
  const connect = async (identity: Parameters<typeof issueToken>[1] = {}) => {
    const { token, identity: id } = issueToken(verifier, identity);
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return { c, id, token };
  };

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier, clock, env: { MAX_SUBSCRIPTIONS: '3', MAX_FRAME_BYTES: '100000' } });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('says ready with the identity, subscribes, publishes, delivers and unsubscribes, echoing refs', async () => {
    const { c, id } = await connect();
    expect(c.frames[0]).toEqual({ type: 'ready', tenant_id: id.tenantId, user_id: id.userId, expires_at: id.expiresAt });
    const topic = topicFor(id.tenantId, 'general');
    expect(await c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed', topic });
    const published = await c.request({ type: 'publish', topic, data: { text: 'hi', n: [1, 2] } });
    expect(published).toMatchObject({ type: 'published', topic, id: expect.stringMatching(/^\d+-\d+$/) });
    const message = await c.next('message');
    expect(message).toEqual({ type: 'message', topic, id: published.id, user_id: id.userId, data: { text: 'hi', n: [1, 2] }, created_at: expect.any(String) });
    expect(await c.request({ type: 'unsubscribe', topic })).toMatchObject({ type: 'unsubscribed', topic });
    await c.request({ type: 'publish', topic, data: 2 });
    expect(c.messages(topic)).toHaveLength(1);
  });

  it('refuses topics of other tenants and malformed topics, without subscribing or publishing', async () => {
    const { c: victim, id: victimId } = await connect();
    const victimTopic = topicFor(victimId.tenantId, 'secret');
    await victim.request({ type: 'subscribe', topic: victimTopic });
    const { c } = await connect();
    for (const type of ['subscribe', 'publish', 'unsubscribe']) {
      expect(await c.request({ type, topic: victimTopic, data: 'x' })).toMatchObject({ type: 'error', code: 'forbidden_topic' });
      expect(await c.request({ type, topic: topicFor(randomUUID(), 'nobody'), data: 'x' })).toMatchObject({ type: 'error', code: 'forbidden_topic' });
    }
    for (const topic of ['tenants/x/channels/a', `tenants/${victimId.tenantId}/channels/bad channel`, 'rooms/1', 42, undefined]) {
      expect(await c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'error', code: 'invalid_topic' });
    }
    // The victim's channel saw nothing.
    await victim.request({ type: 'publish', topic: victimTopic, data: 'own' });
    await victim.waitForMessages(victimTopic, 1);
    expect(victim.messages(victimTopic).map((m) => m.data)).toEqual(['own']);
  });

  it('answers invalid frames with invalid_frame and keeps the connection', async () => {
    const { c, id } = await connect();
    c.ws.send('not json');
    expect(await c.next('error')).toEqual({ type: 'error', code: 'invalid_frame' });
    c.ws.send(Buffer.from('{}'), { binary: true });
    expect(await c.next('error')).toEqual({ type: 'error', code: 'invalid_frame' });
    for (const frame of [{ type: 'dance' }, { type: 'publish', topic: topicFor(id.tenantId, 'a') }, { type: 'subscribe', topic: topicFor(id.tenantId, 'a'), after: 'yesterday' }, { type: 'auth' }]) {
      expect(await c.request(frame)).toMatchObject({ type: 'error', code: 'invalid_frame' });
    }
    expect(await c.request({ type: 'subscribe', topic: topicFor(id.tenantId, 'a') })).toMatchObject({ type: 'subscribed' });
  });

  it('refuses data over 64 KiB and closes frames over MAX_FRAME_BYTES with 1009', async () => {
    const { c, id } = await connect();
    const topic = topicFor(id.tenantId, 'big');
    expect(await c.request({ type: 'publish', topic, data: 'x'.repeat(65_536) })).toMatchObject({ type: 'error', code: 'payload_too_large' });
    expect(await c.request({ type: 'publish', topic, data: 'x'.repeat(65_000) })).toMatchObject({ type: 'published' });
    c.send({ type: 'publish', topic, data: 'x'.repeat(100_001) });
    expect((await c.closed).code).toBe(1009);
  });

  it('bounds subscriptions per connection', async () => {
    const { c, id } = await connect();
    for (const ch of ['a', 'b', 'c']) expect(await c.request({ type: 'subscribe', topic: topicFor(id.tenantId, ch) })).toMatchObject({ type: 'subscribed' });
    expect(await c.request({ type: 'subscribe', topic: topicFor(id.tenantId, 'd') })).toMatchObject({ type: 'error', code: 'too_many_subscriptions' });
    await c.request({ type: 'unsubscribe', topic: topicFor(id.tenantId, 'a') });
    expect(await c.request({ type: 'subscribe', topic: topicFor(id.tenantId, 'd') })).toMatchObject({ type: 'subscribed' });
  });

  it('replays what was missed after an id, then continues live', async () => {
    const { c, id } = await connect();
    const topic = topicFor(id.tenantId, 'replay');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(((await c.request({ type: 'publish', topic, data: i })).id as string));
    const { c: late } = await connect({ tenantId: id.tenantId });
    expect(await late.request({ type: 'subscribe', topic, after: ids[1] })).toMatchObject({ type: 'subscribed' });
    await late.waitForMessages(topic, 3);
    await c.request({ type: 'publish', topic, data: 5 });
    const got = await late.waitForMessages(topic, 4);
    expect(got.map((m) => m.data)).toEqual([2, 3, 4, 5]);
  });

  it('says subscribed with the epoch, and with `after` whether recovery is complete', async () => {
    const { c, id } = await connect();
    const topic = topicFor(id.tenantId, 'epochs');
    const empty = await c.request({ type: 'subscribe', topic });
    expect(empty).toEqual({ type: 'subscribed', topic, epoch: '', ref: empty.ref });
    const m1 = (await c.request({ type: 'publish', topic, data: 1 })).id as string;
    await c.request({ type: 'publish', topic, data: 2 });
    // Again on a live subscription: the epoch, no replay and nothing to recover.
    const again = await c.request({ type: 'subscribe', topic, after: m1 });
    expect(again).toEqual({ type: 'subscribed', topic, epoch: expect.stringMatching(/^[0-9a-f]{32}$/), ref: again.ref });
    const epoch = again.epoch as string;

    const { c: late } = await connect({ tenantId: id.tenantId });
    expect(await late.request({ type: 'subscribe', topic, after: m1, epoch })).toMatchObject({ type: 'subscribed', topic, epoch, recovered: true });
    expect((await late.waitForMessages(topic, 1)).map((m) => m.data)).toEqual([2]);
    const { c: stale } = await connect({ tenantId: id.tenantId });
    const lost = await stale.request({ type: 'subscribe', topic, after: m1, epoch: 'an-epoch-that-is-gone' });
    expect(lost).toMatchObject({ type: 'subscribed', epoch, recovered: false, reason: 'history_lost' });
    // Still replays what is retained.
    expect((await stale.waitForMessages(topic, 1)).map((m) => m.data)).toEqual([2]);
    const { c: gone } = await connect({ tenantId: id.tenantId });
    const missing = await gone.request({ type: 'subscribe', topic: topicFor(id.tenantId, 'never'), after: `${Date.now() - 1000}-0` });
    expect(missing).toMatchObject({ epoch: '', recovered: false, reason: 'history_lost' });
    for (const bad of [42, 'has space', 'x'.repeat(65)]) {
      expect(await c.request({ type: 'subscribe', topic: topicFor(id.tenantId, 'b'), after: m1, epoch: bad })).toMatchObject({ type: 'error', code: 'invalid_frame' });
    }
  });

  it('publishes once per idempotency key and answers a retry with the original id', async () => {
    const { c, id } = await connect();
    const topic = topicFor(id.tenantId, 'idem');
    await c.request({ type: 'subscribe', topic });
    const first = await c.request({ type: 'publish', topic, data: { n: 1 }, idempotency_key: 'order-1' });
    const retry = await c.request({ type: 'publish', topic, data: { n: 1 }, idempotency_key: 'order-1' });
    expect(retry).toMatchObject({ type: 'published', topic, id: first.id });
    await c.request({ type: 'publish', topic, data: { n: 2 } });
    expect((await c.waitForMessages(topic, 2)).map((m) => m.data)).toEqual([{ n: 1 }, { n: 2 }]);
    for (const key of ['', 'has space', 'k'.repeat(129), 7]) {
      expect(await c.request({ type: 'publish', topic, data: 1, idempotency_key: key })).toMatchObject({ type: 'error', code: 'invalid_frame' });
    }
  });

  it('answers data nested deeper than 64 levels with invalid_frame, not a crash', async () => {
    const { c, id } = await connect();
    const topic = topicFor(id.tenantId, 'deep');
    c.ws.send(`{"type":"publish","topic":${JSON.stringify(topic)},"ref":"deep","data":${'['.repeat(5000)}${']'.repeat(5000)}}`);
    expect(await c.next((f) => f.ref === 'deep')).toEqual({ type: 'error', code: 'invalid_frame', ref: 'deep' });
    const ok = JSON.parse(`${'['.repeat(64)}${']'.repeat(64)}`) as unknown;
    expect(await c.request({ type: 'publish', topic, data: ok })).toMatchObject({ type: 'published' });
    expect(await c.request({ type: 'publish', topic, data: [ok] })).toMatchObject({ type: 'error', code: 'invalid_frame' });
  });

  it('closes with 4401 at exp, unless a refresh for the same identity moved it', async () => {
    const now = Math.floor(clock.now() / 1000);
    const { c, id } = await connect({ expiresAt: now + 60 });
    const { token: fresh } = issueToken(verifier, { ...id, expiresAt: now + 600 });
    expect(await c.request({ type: 'auth', token: fresh })).toMatchObject({ type: 'authenticated', expires_at: now + 600 });
    clock.advance(120_000);
    expect(c.isOpen).toBe(true);

    const { token: otherUser } = issueToken(verifier, { ...id, userId: randomUUID(), expiresAt: now + 6000 });
    expect(await c.request({ type: 'auth', token: otherUser })).toMatchObject({ type: 'error', code: 'identity_mismatch' });
    const { token: otherTenant } = issueToken(verifier, { ...id, tenantId: randomUUID(), expiresAt: now + 6000 });
    expect(await c.request({ type: 'auth', token: otherTenant })).toMatchObject({ type: 'error', code: 'identity_mismatch' });
    expect(await c.request({ type: 'auth', token: 'garbage' })).toMatchObject({ type: 'error', code: 'invalid_or_missing_token' });

    // The old expiry (now + 600) stands.
    clock.advance(479_000);
    expect(c.isOpen).toBe(true);
    clock.advance(1_000);
    expect((await c.closed).code).toBe(4401);
  });

  it('acts on no frame that arrives after it closed the connection: no publish, no subscription', async () => {
    const now = Math.floor(clock.now() / 1000);
    const { id } = await connect();
    const { c: watcher } = await connect({ tenantId: id.tenantId });
    const topic = topicFor(id.tenantId, 'after-close');
    await watcher.request({ type: 'subscribe', topic });
    const { c: closing } = await connect({ tenantId: id.tenantId, expiresAt: now + 60 });
    // Written before the server closes it, read by the server after: ws still
    // emits such frames while its close handshake runs.
    closing.ws.send(JSON.stringify({ type: 'publish', topic, data: 'after close', ref: 'late' }));
    closing.ws.send(JSON.stringify({ type: 'subscribe', topic: topicFor(id.tenantId, 'late-sub'), ref: 'late-sub' }));
    clock.advance(61_000);
    expect((await closing.closed).code).toBe(4401);
    expect(closing.frames.filter((f) => f.ref === 'late' || f.ref === 'late-sub')).toEqual([]);
    // The channel holds only what came after, from a connection still open.
    const marker = await watcher.request({ type: 'publish', topic, data: 'marker' });
    await watcher.waitForMessages(topic, 1);
    expect(watcher.messages(topic).map((m) => m.data)).toEqual(['marker']);
    expect(marker).toMatchObject({ type: 'published' });
  });

  it('drops peers that stop answering pings', async () => {
    const rt2 = await startRealtime({ verifier, pingIntervalMs: 50 });
    const { token } = issueToken(verifier);
    const silent = await WsTestClient.connect(rt2.ws, token, { autoPong: false });
    const healthy = await WsTestClient.connect(rt2.ws, token);
    expect((await silent.closed).code).toBe(1006);
    expect(healthy.isOpen).toBe(true);
    await healthy.close();
    await rt2.stop();
  });

  it('drops a consumer whose send buffer passes MAX_BUFFERED_BYTES instead of growing memory', async () => {
    const rt2 = await startRealtime({ verifier, env: { MAX_BUFFERED_BYTES: '65536' } });
    const { token, identity } = issueToken(verifier);
    const topic = topicFor(identity.tenantId, 'flood');
    const slow = await WsTestClient.connect(rt2.ws, token);
    const publisher = await WsTestClient.connect(rt2.ws, token);
    await slow.request({ type: 'subscribe', topic });
    // Stop reading: the server's writes pile up once the kernel buffers are full.
    (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
    const data = 'x'.repeat(60_000);
    for (let i = 0; i < 200; i++) publisher.send({ type: 'publish', topic, data, ref: i });
    await publisher.next((f) => f.ref === 199, 10_000);
    (slow.ws as unknown as { _socket: { resume(): void } })._socket.resume();
    expect([1013, 1006]).toContain((await slow.closed).code);
    expect(slow.messages(topic).length).toBeLessThan(200);
    expect(await rt2.server.metrics.registry.getSingleMetricAsString('relay_realtime_closes_total')).toMatch(/code="1013"[^\n]* 1/);
    await publisher.close();
    await rt2.stop();
  });

  it('closes every connection with 1001 on stop', async () => {
    const rt2 = await startRealtime({ verifier });
    const { token } = issueToken(verifier);
    const a = await WsTestClient.connect(rt2.ws, token);
    const b = await WsTestClient.connect(rt2.ws, token, { via: 'query' });
    await rt2.stop();
    expect((await a.closed).code).toBe(1001);
    expect((await b.closed).code).toBe(1001);
  });
});
