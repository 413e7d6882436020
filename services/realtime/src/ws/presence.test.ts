import { randomUUID } from 'node:crypto';
import { parseCapability } from '@service-relay/channels';
import { FakeVerifier } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { MemoryRulesSource } from '../test-support/memory-rules-source';
import { gatewayHeaders, issueToken, startRealtime, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient, type Frame } from '../test-support/ws-test-client';

// Presence on one embedded instance (the memory driver): frames, errors,
// permissions, several connections of one user, member data limits, REST.
describe('presence over WebSocket and REST (one instance)', () => {
  const verifier = new FakeVerifier();
  const rules = new MemoryRulesSource();
  let rt: RealtimeInstance;
  const clients: WsTestClient[] = [];
  const connect = async (identity: Partial<VerifiedIdentity>) => {
    const { token, identity: id } = issueToken(verifier, identity);
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return { c, id };
  };
  const isEvent = (type: 'join' | 'leave', topic: string, userId: string) => (f: Frame) => f.type === type && f.topic === topic && (f.member as { user_id: string }).user_id === userId;
  const rest = (identity: VerifiedIdentity, channel: string, method = 'GET') =>
    fetch(`${rt.http}/api/v1/channels/${encodeURIComponent(channel)}/presence`, { method, headers: gatewayHeaders(identity) });
  // A pong comes after every frame sent before it on the same socket.
  const flushed = (c: WsTestClient) => c.request({ type: 'ping' });

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier, channelRules: rules });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('members see joins and leaves; the presence request and REST list the members sorted by user_id, with their data', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'presence:lobby');
    const [low, high] = ['00000000-0000-4000-8000-000000000001', 'ffffffff-0000-4000-8000-000000000001'];
    const { c: alice } = await connect({ tenantId, userId: high });
    const { c: bob, id: bobId } = await connect({ tenantId, userId: low });
    expect(await alice.request({ type: 'subscribe', topic, member: { name: 'Alice' } })).toMatchObject({ type: 'subscribed', topic });
    expect(await alice.next(isEvent('join', topic, high))).toEqual({ type: 'join', topic, member: { user_id: high, data: { name: 'Alice' } } });
    await bob.request({ type: 'subscribe', topic });
    expect(await alice.next(isEvent('join', topic, low))).toEqual({ type: 'join', topic, member: { user_id: low } });
    const listed = [{ user_id: low }, { user_id: high, data: { name: 'Alice' } }];
    expect(await bob.request({ type: 'presence', topic })).toEqual({ type: 'presence', topic, members: listed, ref: expect.any(String) });
    const res = await rest(bobId, 'presence:lobby');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ channel: 'presence:lobby', members: listed });
    // Unsubscribe leaves; so does a closed connection.
    await bob.request({ type: 'unsubscribe', topic });
    expect(await alice.next(isEvent('leave', topic, low))).toEqual({ type: 'leave', topic, member: { user_id: low } });
    await bob.request({ type: 'subscribe', topic });
    await alice.next(isEvent('join', topic, low));
    await bob.close();
    await alice.next(isEvent('leave', topic, low));
    expect((await alice.request({ type: 'presence', topic })).members).toEqual([{ user_id: high, data: { name: 'Alice' } }]);
  });

  it('several connections of one user are one member: one join, data of the latest join, one leave after the last', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'presence:room');
    const userId = randomUUID();
    const { c: watcher } = await connect({ tenantId });
    await watcher.request({ type: 'subscribe', topic });
    const { c: tab1 } = await connect({ tenantId, userId });
    const { c: tab2 } = await connect({ tenantId, userId });
    await tab1.request({ type: 'subscribe', topic, member: { tab: 1 } });
    await tab2.request({ type: 'subscribe', topic, member: { tab: 2 } });
    expect(await watcher.next(isEvent('join', topic, userId))).toMatchObject({ member: { user_id: userId, data: { tab: 1 } } });
    const members = (await watcher.request({ type: 'presence', topic })).members as { user_id: string; data?: unknown }[];
    expect(members.filter((m) => m.user_id === userId)).toEqual([{ user_id: userId, data: { tab: 2 } }]);
    await tab1.close();
    await flushed(watcher);
    await tab2.request({ type: 'unsubscribe', topic });
    await watcher.next(isEvent('leave', topic, userId));
    expect(watcher.frames.filter((f) => (f.type === 'join' || f.type === 'leave') && (f.member as { user_id: string }).user_id === userId).map((f) => f.type)).toEqual(['join', 'leave']);
  });

  it('a presence request on a channel without presence is presence_not_enabled; subscribers of such a channel are nobody\u2019s members; the connection stays', async () => {
    const { c, id } = await connect({});
    const topic = topicFor(id.tenantId, 'general');
    await c.request({ type: 'subscribe', topic, member: { ignored: true } });
    expect(await c.request({ type: 'presence', topic })).toEqual({ type: 'error', code: 'presence_not_enabled', ref: expect.any(String) });
    expect(c.frames.some((f) => f.type === 'join')).toBe(false);
    const res = await rest(id, 'general');
    expect(res.status).toBe(400);
    expect(await res.text()).toBe('{"errors":["presence_not_enabled"]}');
    expect(await c.request({ type: 'presence', topic: 'tenants/x/channels/y' })).toMatchObject({ type: 'error', code: 'invalid_topic' });
    expect(await c.request({ type: 'presence', topic: topicFor(randomUUID(), 'presence:x') })).toMatchObject({ type: 'error', code: 'forbidden_topic' });
    expect(await c.request({ type: 'ping' })).toMatchObject({ type: 'pong' });
    // A tenant's rules decide which channels have presence.
    const tenantId = randomUUID();
    rules.set(tenantId, { channels: [{ pattern: 'room-*', actions: ['subscribe', 'presence'], presence: true }] });
    const { c: inRoom, id: inRoomId } = await connect({ tenantId });
    const room = topicFor(tenantId, 'room-1');
    await inRoom.request({ type: 'subscribe', topic: room });
    expect(await inRoom.request({ type: 'presence', topic: room })).toMatchObject({ type: 'presence', members: [{ user_id: inRoomId.userId }] });
    // Its rules replace the default ones: `presence:*` has no presence for this tenant.
    expect(await inRoom.request({ type: 'presence', topic: topicFor(tenantId, 'presence:x') })).toMatchObject({ type: 'error', code: 'presence_not_enabled' });
  });

  it('without the presence action a subscriber is a member others see, but sees no joins or leaves and may not list (WS forbidden_channel, REST 403)', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'presence:staff');
    const { c: watcher } = await connect({ tenantId });
    await watcher.request({ type: 'subscribe', topic });
    const { c: capped, id: cappedId } = await connect({ tenantId, cap: parseCapability({ 'presence:*': ['subscribe'] })! });
    expect(await capped.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
    await watcher.next(isEvent('join', topic, cappedId.userId));
    const { c: other, id: otherId } = await connect({ tenantId });
    await other.request({ type: 'subscribe', topic });
    await watcher.next(isEvent('join', topic, otherId.userId));
    await flushed(capped);
    expect(capped.frames.filter((f) => f.type === 'join' || f.type === 'leave')).toEqual([]);
    expect(await capped.request({ type: 'presence', topic })).toEqual({ type: 'error', code: 'forbidden_channel', ref: expect.any(String) });
    expect(capped.isOpen).toBe(true);
    const res = await rest(cappedId, 'presence:staff');
    expect(res.status).toBe(403);
    expect(await res.text()).toBe('{"errors":["forbidden_channel"]}');
    // Another user's private channel is nobody else's to list either.
    const res2 = await rest(cappedId, `user:${randomUUID()}`);
    expect(res2.status).toBe(403);
    await res2.arrayBuffer();
  });

  it('member data: a JSON object of at most 256 bytes serialized (UTF-8); anything else is invalid_frame and nothing joins', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'presence:limits');
    const { c } = await connect({ tenantId });
    const fits = { n: 'x'.repeat(248) };
    expect(Buffer.byteLength(JSON.stringify(fits))).toBe(256);
    const tooBig = [{ n: 'x'.repeat(249) }, { n: '\u00e9'.repeat(125) }];
    expect(tooBig.map((m) => Buffer.byteLength(JSON.stringify(m)))).toEqual([257, 258]);
    for (const member of [...tooBig, 'name', 42, true, ['a'], { deep: [[[[[['x'.repeat(300)]]]]]] }]) {
      expect(await c.request({ type: 'subscribe', topic, member })).toMatchObject({ type: 'error', code: 'invalid_frame' });
    }
    expect(await c.request({ type: 'presence', topic })).toMatchObject({ type: 'presence', members: [] });
    expect(await c.request({ type: 'subscribe', topic, member: null })).toMatchObject({ type: 'subscribed' });
    expect(await c.request({ type: 'unsubscribe', topic })).toMatchObject({ type: 'unsubscribed' });
    expect(await c.request({ type: 'subscribe', topic, member: fits })).toMatchObject({ type: 'subscribed' });
    expect((await c.request({ type: 'presence', topic })).members).toEqual([{ user_id: expect.any(String), data: fits }]);
  });

  it('REST: a malformed channel is invalid_channel, another method 405, no internal token 401', async () => {
    const { id } = await connect({});
    const bad = await fetch(`${rt.http}/api/v1/channels/bad%20channel/presence`, { headers: gatewayHeaders(id) });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toBe('{"errors":["invalid_channel"]}');
    const post = await rest(id, 'presence:a', 'POST');
    expect(post.status).toBe(405);
    await post.arrayBuffer();
    const anon = await fetch(`${rt.http}/api/v1/channels/presence:a/presence`);
    expect(anon.status).toBe(401);
    await anon.arrayBuffer();
  });
});
