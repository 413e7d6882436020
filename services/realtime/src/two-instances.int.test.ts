import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import type { TenantEventKind } from '@service-relay/tenant-events';
import { FakeVerifier, uniqueRedisPrefix } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { compareMessageIds } from './messaging/message-id';
import { ManualScheduler } from './timers/scheduler';
import { gatewayHeaders, issueToken, startOnRedis, stopOnRedis, topicFor, type RealtimeInstance } from './test-support/realtime-harness';
import { WsTestClient } from './test-support/ws-test-client';

// Two realtime instances on one real Redis, as two processes would run them.
describe('realtime: two instances on one Redis', () => {
  const verifier = new FakeVerifier();
  const clock = new ManualScheduler(Date.now());
  const prefix = uniqueRedisPrefix('realtime');
  let a: RealtimeInstance;
  let b: RealtimeInstance;
  const clients: WsTestClient[] = [];
  const connect = async (rt: RealtimeInstance, identity: Partial<VerifiedIdentity> = {}) => {
    const { token, identity: id } = issueToken(verifier, { expiresAt: Math.floor(clock.now() / 1000) + 3600, ...identity });
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return { c, id, token };
  };
  const restPublish = async (rt: RealtimeInstance, id: VerifiedIdentity, channel: string, data: unknown) => {
    const res = await fetch(`${rt.http}/api/v1/channels/${channel}/messages`, { method: 'POST', headers: gatewayHeaders(id), body: JSON.stringify({ data }) });
    expect(res.status).toBe(201);
    return ((await res.json()) as { id: string }).id;
  };

  beforeAll(async () => {
    [a, b] = (await startOnRedis(2, verifier, prefix, clock)) as [RealtimeInstance, RealtimeInstance];
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(() => stopOnRedis([a, b], verifier, prefix));

  it('delivers every message, from WebSocket or REST on either instance, to subscribers on both, in one order', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'orders');
    const { c: onA, id } = await connect(a, { tenantId });
    const { c: onB } = await connect(b, { tenantId });
    await Promise.all([onA.request({ type: 'subscribe', topic }), onB.request({ type: 'subscribe', topic })]);
    const n = 100;
    for (let i = 0; i < n / 2; i++) onA.send({ type: 'publish', topic, data: { from: 'ws', i } });
    await Promise.all(Array.from({ length: n / 2 }, (_, i) => restPublish(b, id, 'orders', { from: 'rest', i })));
    const [gotA, gotB] = await Promise.all([onA.waitForMessages(topic, n), onB.waitForMessages(topic, n)]);
    const ids = gotA.map((m) => m.id as string);
    expect(gotB.map((m) => m.id)).toEqual(ids);
    expect([...ids].sort(compareMessageIds)).toEqual(ids);
    expect(new Set(ids).size).toBe(n);
    // Per publisher, its own order holds too.
    expect(gotB.filter((m) => (m.data as { from: string }).from === 'ws').map((m) => (m.data as { i: number }).i)).toEqual([...Array(n / 2).keys()]);
  });

  it('refuses other tenants\u2019 topics on every instance and leaks nothing to them', async () => {
    const { c: owner, id: ownerId } = await connect(b);
    const topic = topicFor(ownerId.tenantId, 'private');
    await owner.request({ type: 'subscribe', topic });
    const { c: intruder } = await connect(a);
    expect(await intruder.request({ type: 'subscribe', topic })).toMatchObject({ type: 'error', code: 'forbidden_topic' });
    expect(await intruder.request({ type: 'publish', topic, data: 'spoof' })).toMatchObject({ type: 'error', code: 'forbidden_topic' });
    await owner.request({ type: 'publish', topic, data: 'own' });
    await owner.waitForMessages(topic, 1);
    expect(owner.messages(topic).map((m) => m.data)).toEqual(['own']);
    expect(intruder.frames.some((f) => f.type === 'message')).toBe(false);
  });

  it('recovers with `after` across instances with no gap and no duplicate while a publisher hammers', async () => {
    const tenantId = randomUUID();
    const topic = topicFor(tenantId, 'firehose');
    const { c: publisher } = await connect(a, { tenantId });
    const { c: first } = await connect(b, { tenantId });
    await first.request({ type: 'subscribe', topic });
    const total = 600;
    const acks: Promise<unknown>[] = [];
    // Publish as fast as the socket takes it, yielding now and then so the reconnect below runs mid-stream.
    const hammer = (async () => {
      for (let i = 0; i < total; i++) {
        acks.push(publisher.next((f) => f.type === 'published' && f.ref === i, 20_000));
        publisher.send({ type: 'publish', topic, data: i, ref: i });
        if (i % 20 === 0) await new Promise((r) => setImmediate(r));
      }
    })();
    const seen = await first.waitForMessages(topic, 50);
    await first.close();
    const lastSeen = seen[seen.length - 1]!.id as string;
    const { c: second } = await connect(b, { tenantId });
    expect(await second.request({ type: 'subscribe', topic, after: lastSeen })).toMatchObject({ type: 'subscribed' });
    await hammer;
    const published = (await Promise.all(acks)).map((f) => (f as { id: string }).id);
    const expected = published.filter((id) => compareMessageIds(id, lastSeen) > 0);
    expect(expected.length).toBeGreaterThan(0);
    const recovered = await second.waitForMessages(topic, expected.length);
    expect(recovered.map((m) => m.id)).toEqual(expected);
    // And nothing arrives beyond them.
    await second.request({ type: 'unsubscribe', topic });
    expect(second.messages(topic)).toHaveLength(expected.length);
  });

  it('closes at exp with 4401 on each instance unless refreshed (injected clock)', async () => {
    const exp = Math.floor(clock.now() / 1000) + 60;
    const tenantId = randomUUID();
    const { c: expiring } = await connect(a, { tenantId, expiresAt: exp });
    const { c: refreshed, id } = await connect(b, { tenantId, expiresAt: exp });
    const { token } = issueToken(verifier, { ...id, expiresAt: exp + 600 });
    expect(await refreshed.request({ type: 'auth', token })).toMatchObject({ type: 'authenticated', expires_at: exp + 600 });
    clock.advance(61_000);
    expect((await expiring.closed).code).toBe(4401);
    expect(await refreshed.request({ type: 'subscribe', topic: topicFor(tenantId, 'x') })).toMatchObject({ type: 'subscribed' });
  });

  describe('revocation through tenant changes', () => {
    let version = 0;
    // The tenant feed hands every instance the same change; it counts as
    // applied once each instance's handlers ran.
    const publishEvent = async (tenantId: string, kind: TenantEventKind, revoked: number[] = [], v = ++version) => {
      const change = { tenant_id: tenantId, kind, version: v, revoked_key_versions: revoked };
      await Promise.all([a.feed.push(change), b.feed.push(change)]);
      return { acknowledged: 2 };
    };

    /** Connections of a tenant on both instances: one per key version 1 and 2, plus another tenant's. */
    async function population() {
      const tenantId = randomUUID();
      const conns = {
        aV1: (await connect(a, { tenantId, keyVersion: 1 })).c,
        bV1: (await connect(b, { tenantId, keyVersion: 1, keySlot: 'previous' })).c,
        aV2: (await connect(a, { tenantId, keyVersion: 2 })).c,
        bV2: (await connect(b, { tenantId, keyVersion: 2 })).c,
        otherA: (await connect(a, { keyVersion: 1 })).c,
        otherB: (await connect(b, { keyVersion: 1 })).c,
      };
      return { tenantId, conns };
    }

    async function expectClosedExactly(conns: Record<string, WsTestClient>, closed: string[], startedAt: number) {
      await Promise.all(closed.map(async (name) => expect((await conns[name]!.closed).code).toBe(4401)));
      expect(Date.now() - startedAt).toBeLessThan(1000);
      for (const [name, c] of Object.entries(conns)) {
        if (closed.includes(name)) continue;
        // A round trip proves the connection is still served.
        expect(await c.request({ type: 'unsubscribe', topic: topicFor((c.frames[0]!.tenant_id as string), 'x') })).toMatchObject({ type: 'unsubscribed' });
      }
    }

    it.each([
      ['disabled', [], ['aV1', 'bV1', 'aV2', 'bV2']],
      ['revoked_all', [], ['aV1', 'bV1', 'aV2', 'bV2']],
      ['previous_expired', [1], ['aV1', 'bV1']],
      ['rotated', [], []],
      ['enabled', [], []],
    ] as const)('%s closes exactly the revoked connections on both instances within a second', async (kind, revoked, closed) => {
      const { tenantId, conns } = await population();
      const startedAt = Date.now();
      const result = await publishEvent(tenantId, kind, [...revoked]);
      expect(result.acknowledged).toBeGreaterThanOrEqual(2);
      await expectClosedExactly(conns, [...closed], startedAt);
    });

    it('keeps a connection whose refresh moved it to the new key when the previous one expires', async () => {
      const tenantId = randomUUID();
      const { c, id } = await connect(a, { tenantId, keyVersion: 1 });
      const { token } = issueToken(verifier, { ...id, keyVersion: 2 });
      await c.request({ type: 'auth', token });
      const { c: stale } = await connect(b, { tenantId, keyVersion: 1 });
      await publishEvent(tenantId, 'previous_expired', [1]);
      expect((await stale.closed).code).toBe(4401);
      expect(await c.request({ type: 'unsubscribe', topic: topicFor(tenantId, 'x') })).toMatchObject({ type: 'unsubscribed' });
    });

    it('re-verifies every connection after a tenant feed reset and closes those that fail', async () => {
      const tenantId = randomUUID();
      const { c: kept } = await connect(a, { tenantId });
      const { c: dropped, token } = await connect(b, { tenantId });
      verifier.deny(token);
      const startedAt = Date.now();
      await Promise.all([a.feed.reset(), b.feed.reset()]);
      expect((await dropped.closed).code).toBe(4401);
      expect(Date.now() - startedAt).toBeLessThan(1000);
      expect(await kept.request({ type: 'unsubscribe', topic: topicFor(tenantId, 'x') })).toMatchObject({ type: 'unsubscribed' });
    });

    it('acknowledges no publish, over WebSocket or REST, while the tenant feed is not current; its WebSockets are closed 1013', async () => {
      const { c, id } = await connect(a);
      const topic = topicFor(id.tenantId, 'gated');
      a.feed.setCurrent(false);
      try {
        // The frame is not acted on: the instance cannot vouch for the connection and closes it (the client reconnects elsewhere).
        c.send({ type: 'publish', topic, data: 1 });
        expect((await c.closed).code).toBe(1013);
        const res = await fetch(`${a.http}/api/v1/channels/gated/messages`, { method: 'POST', headers: gatewayHeaders(id), body: JSON.stringify({ data: 2 }) });
        expect(res.status).toBe(503);
        expect(await res.text()).toBe('{"errors":["unavailable"]}');
      } finally {
        a.feed.setCurrent(true);
      }
      const { c: again } = await connect(a, { tenantId: id.tenantId, userId: id.userId });
      expect(await again.request({ type: 'publish', topic, data: 3 })).toMatchObject({ type: 'published' });
      const history = (await (await fetch(`${a.http}/api/v1/channels/gated/messages`, { headers: gatewayHeaders(id) })).json()) as { messages: Array<{ data: unknown }> };
      expect(history.messages.map((m) => m.data)).toEqual([3]);
    });
  });
});
