import { randomUUID } from 'node:crypto';
import { FakeVerifier, uniqueRedisPrefix } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gatewayHeaders, issueToken, startOnRedis, startRealtime, stopOnRedis, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient, type Frame } from '../test-support/ws-test-client';

// Presence across two realtime instances on one real Redis, as two processes would run them.
describe('presence: two instances on one Redis', () => {
  const verifier = new FakeVerifier();
  const prefix = uniqueRedisPrefix('presence-2');
  let a: RealtimeInstance;
  let b: RealtimeInstance;
  const clients: WsTestClient[] = [];
  const connect = async (rt: RealtimeInstance, identity: Partial<VerifiedIdentity>) => {
    const { token, identity: id } = issueToken(verifier, identity);
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return { c, id };
  };
  const event = (type: 'join' | 'leave', userId: string) => (f: Frame) => f.type === type && (f.member as { user_id: string }).user_id === userId;
  const restList = async (rt: RealtimeInstance, identity: VerifiedIdentity, channel: string) => {
    const res = await fetch(`${rt.http}/api/v1/channels/${channel}/presence`, { headers: gatewayHeaders(identity) });
    expect(res.status).toBe(200);
    return (await res.json()) as { channel: string; members: { user_id: string; data?: unknown }[] };
  };
  const sortedIds = (...ids: string[]) => [...ids].sort();

  beforeAll(async () => {
    [a, b] = (await startOnRedis(2, verifier, prefix)) as [RealtimeInstance, RealtimeInstance];
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(() => stopOnRedis([a, b], verifier, prefix));

  it('joins and leaves on either instance reach members on both; the presence request and REST list the same members on both', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'presence:room');
    const { c: alice, id: aliceId } = await connect(a, { tenantId });
    const { c: bob, id: bobId } = await connect(b, { tenantId });
    await alice.request({ type: 'subscribe', topic, member: { name: 'Alice' } });
    await bob.request({ type: 'subscribe', topic, member: { name: 'Bob' } });
    expect(await alice.next(event('join', bobId.userId))).toEqual({ type: 'join', topic, member: { user_id: bobId.userId, data: { name: 'Bob' } } });
    // Bob watched before he joined: he sees his own join, and Alice was already there.
    await bob.next(event('join', bobId.userId));
    const both = [
      { user_id: aliceId.userId, data: { name: 'Alice' } },
      { user_id: bobId.userId, data: { name: 'Bob' } },
    ].sort((x, y) => (x.user_id < y.user_id ? -1 : 1));
    expect((await bob.request({ type: 'presence', topic })).members).toEqual(both);
    expect((await alice.request({ type: 'presence', topic })).members).toEqual(both);
    expect(await restList(a, bobId, 'presence:room')).toEqual({ channel: 'presence:room', members: both });
    expect(await restList(b, aliceId, 'presence:room')).toEqual({ channel: 'presence:room', members: both });
    await bob.request({ type: 'unsubscribe', topic });
    expect(await alice.next(event('leave', bobId.userId))).toEqual({ type: 'leave', topic, member: { user_id: bobId.userId } });
    expect((await restList(b, aliceId, 'presence:room')).members).toEqual([{ user_id: aliceId.userId, data: { name: 'Alice' } }]);
  });

  it('one user connected to both instances is one member: one join, no leave until the last connection goes', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'presence:doc');
    const userId = randomUUID();
    const { c: watcher, id: watcherId } = await connect(a, { tenantId });
    await watcher.request({ type: 'subscribe', topic });
    const { c: onA } = await connect(a, { tenantId, userId });
    const { c: onB } = await connect(b, { tenantId, userId });
    await onA.request({ type: 'subscribe', topic, member: { tab: 'a' } });
    await onB.request({ type: 'subscribe', topic, member: { tab: 'b' } });
    await watcher.next(event('join', userId));
    expect((await restList(b, watcherId, 'presence:doc')).members.filter((m) => m.user_id === userId)).toEqual([{ user_id: userId, data: { tab: 'b' } }]);
    await onA.close();
    // Another user's join after the close: a leave of `userId` caused by it would have come first.
    const { c: marker, id: markerId } = await connect(b, { tenantId });
    await marker.request({ type: 'subscribe', topic });
    await watcher.next(event('join', markerId.userId));
    expect(watcher.frames.some(event('leave', userId))).toBe(false);
    expect((await restList(a, watcherId, 'presence:doc')).members.map((m) => m.user_id)).toEqual(sortedIds(watcherId.userId, userId, markerId.userId));
    await onB.close();
    await watcher.next(event('leave', userId));
    expect(watcher.frames.filter((f) => event('join', userId)(f) || event('leave', userId)(f)).map((f) => f.type)).toEqual(['join', 'leave']);
  });

  it('a stopped instance (SIGTERM) takes its members out at once, with leave events on the other', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'presence:stop');
    const third = await startRealtime({ verifier, env: { REDIS_URL: a.config.redis.url, REDIS_PREFIX: prefix } });
    let stopped = false;
    try {
      const { c: watcher, id: watcherId } = await connect(a, { tenantId });
      await watcher.request({ type: 'subscribe', topic });
      const { c: leaving, id: leavingId } = await connect(third, { tenantId });
      await leaving.request({ type: 'subscribe', topic });
      await watcher.next(event('join', leavingId.userId));
      stopped = true;
      await third.stop();
      await watcher.next(event('leave', leavingId.userId));
      expect((await restList(b, watcherId, 'presence:stop')).members).toEqual([{ user_id: watcherId.userId }]);
    } finally {
      if (!stopped) await third.stop();
    }
  });
});
