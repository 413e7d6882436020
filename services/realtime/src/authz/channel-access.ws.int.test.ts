import { randomUUID } from 'node:crypto';
import { parseCapability } from '@service-relay/channels';
import { FakeVerifier, uniqueRedisPrefix } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualScheduler } from '../timers/scheduler';
import { MemoryRulesSource } from '../test-support/memory-rules-source';
import { gatewayHeaders, issueToken, startOnRedis, stopOnRedis, TEST_INTERNAL_TOKEN, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';
import { ACCESS_CASES, ALICE, BOB, CAROL, PRESENCE_CASES, TENANT_RULES, type CapClaim } from './channel-access.cases';

// The channel-authorization table over WebSocket, against two realtime
// instances on one Redis (the fake verifier hands each token's cap over the
// real gRPC wire). History rows are REST's; `subscribe` with `after` is a
// subscribe, so its replay is covered by the same rows.
describe('channel authorization over WebSocket, two instances', () => {
  const verifier = new FakeVerifier();
  const clock = new ManualScheduler(Date.now());
  const prefix = uniqueRedisPrefix('authz');
  // One "registry" for both instances: each asks it on a tenant's first request.
  const rules = new MemoryRulesSource();
  let a: RealtimeInstance;
  let b: RealtimeInstance;
  const clients: WsTestClient[] = [];
  const capOf = (cap: CapClaim) => (cap === undefined ? {} : { cap: parseCapability(cap)! });
  const connect = async (rt: RealtimeInstance, userId: string, cap: CapClaim, tenantId = randomUUID()) => {
    const { token, identity } = issueToken(verifier, { tenantId, userId, expiresAt: Math.floor(clock.now() / 1000) + 3600, ...capOf(cap) });
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return { c, identity };
  };

  beforeAll(async () => {
    [a, b] = (await startOnRedis(2, verifier, prefix, clock, rules)) as [RealtimeInstance, RealtimeInstance];
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(() => stopOnRedis([a, b], verifier, prefix));

  const wsCases = ACCESS_CASES.filter((c) => c.action === 'subscribe' || c.action === 'publish');
  it.each(wsCases.map((c, i) => ({ ...c, i })))('$name → $expected', async (c) => {
    const tenantId = randomUUID();
    if (c.rules !== undefined) rules.set(tenantId, c.rules);
    const { c: ws, identity } = await connect(c.i % 2 === 0 ? a : b, c.userId, c.cap, tenantId);
    const topic = topicFor(identity.tenantId, c.channel);
    const frame = c.action === 'subscribe' ? { type: 'subscribe', topic } : { type: 'publish', topic, data: { n: c.i } };
    const reply = await ws.request(frame);
    if (c.expected === 'allow') {
      expect(reply).toMatchObject({ type: c.action === 'subscribe' ? 'subscribed' : 'published', topic });
    } else {
      expect(reply).toEqual({ type: 'error', code: 'forbidden_channel', ref: expect.any(String) });
      // The connection stays and answers the next frame.
      expect(await ws.request({ type: 'unsubscribe', topic })).toMatchObject({ type: 'unsubscribed', topic });
      expect(ws.isOpen).toBe(true);
    }
  });

  // The presence action: allowed is the member list, or presence_not_enabled on a channel without presence; never forbidden_channel.
  const presenceCases = ACCESS_CASES.filter((c) => c.action === 'presence');
  it.each(presenceCases.map((c, i) => ({ ...c, i })))('presence request: $name \u2192 $expected', async (c) => {
    const tenantId = randomUUID();
    if (c.rules !== undefined) rules.set(tenantId, c.rules);
    const { c: ws, identity } = await connect(c.i % 2 === 0 ? a : b, c.userId, c.cap, tenantId);
    const topic = topicFor(identity.tenantId, c.channel);
    const reply = await ws.request({ type: 'presence', topic });
    if (c.expected === 'allow') expect(reply.type === 'presence' || reply.code === 'presence_not_enabled', JSON.stringify(reply)).toBe(true);
    else expect(reply).toEqual({ type: 'error', code: 'forbidden_channel', ref: expect.any(String) });
    const res = await fetch(`${b.http}/api/v1/channels/${encodeURIComponent(c.channel)}/presence`, { headers: gatewayHeaders(identity) });
    expect(res.status).toBe(c.expected === 'deny' ? 403 : reply.type === 'presence' ? 200 : 400);
    await res.arrayBuffer();
  });

  // The rule's presence flag: a subscriber on one instance is a member, as the other instance lists it (the host server API's listing, which no rule narrows).
  it.each(PRESENCE_CASES.map((c, i) => ({ ...c, i })))('presence flag: $name \u2192 member: $expected', async (c) => {
    const tenantId = randomUUID();
    if (c.rules !== undefined) rules.set(tenantId, c.rules);
    const { c: ws, identity } = await connect(a, ALICE, undefined, tenantId);
    expect(await ws.request({ type: 'subscribe', topic: topicFor(tenantId, c.channel) })).toMatchObject({ type: 'subscribed' });
    const res = await fetch(`${b.http}/internal/server/channels/${encodeURIComponent(c.channel)}/presence`, {
      headers: { 'x-internal-token': TEST_INTERNAL_TOKEN, 'x-relay-server': '1', 'x-relay-tenant-id': identity.tenantId },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { members: unknown[] }).members).toEqual(c.expected ? [{ user_id: ALICE }] : []);
  });

  it('a dm reaches its members on the other instance; a non-member can neither read it, replay it, nor write to it', async () => {
    const tenantId = randomUUID();
    const channel = `dm:${ALICE}:${BOB}`;
    const topic = topicFor(tenantId, channel);
    const { c: alice, identity: aliceId } = await connect(a, ALICE, undefined, tenantId);
    const { c: bob } = await connect(b, BOB, { 'dm:*': ['subscribe', 'publish'] }, tenantId);
    const { c: carol } = await connect(b, CAROL, undefined, tenantId);
    expect(await bob.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
    const published = await alice.request({ type: 'publish', topic, data: 'hi bob' });
    expect(published).toMatchObject({ type: 'published' });
    const [got] = await bob.waitForMessages(topic, 1);
    expect(got).toMatchObject({ data: 'hi bob', user_id: aliceId.userId });
    const epoch = (await alice.request({ type: 'subscribe', topic })).epoch as string;
    for (const frame of [
      { type: 'subscribe', topic },
      { type: 'subscribe', topic, after: published.id, epoch },
      { type: 'publish', topic, data: 'spoof' },
    ]) {
      expect(await carol.request(frame)).toMatchObject({ type: 'error', code: 'forbidden_channel' });
    }
    expect(carol.messages(topic)).toEqual([]);
  });

  it('a refresh with a narrower cap applies to new requests; live subscriptions stay', async () => {
    const tenantId = randomUUID();
    const wide: CapClaim = { 'orders.*': ['subscribe', 'publish'] };
    const { c, identity } = await connect(a, ALICE, wide, tenantId);
    const eu = topicFor(tenantId, 'orders.eu');
    const us = topicFor(tenantId, 'orders.us');
    expect(await c.request({ type: 'subscribe', topic: eu })).toMatchObject({ type: 'subscribed' });
    const narrow = issueToken(verifier, { ...identity, expiresAt: identity.expiresAt + 60, ...capOf({ 'orders.eu': ['subscribe'] }) });
    expect(await c.request({ type: 'auth', token: narrow.token })).toMatchObject({ type: 'authenticated' });
    expect(await c.request({ type: 'subscribe', topic: us })).toMatchObject({ type: 'error', code: 'forbidden_channel' });
    expect(await c.request({ type: 'publish', topic: eu, data: 1 })).toMatchObject({ type: 'error', code: 'forbidden_channel' });
    // Not retroactive: the live subscription to orders.eu still delivers (published by another user over REST on b).
    const other: VerifiedIdentity = issueToken(verifier, { tenantId }).identity;
    const res = await fetch(`${b.http}/api/v1/channels/orders.eu/messages`, { method: 'POST', headers: gatewayHeaders(other), body: JSON.stringify({ data: 'still live' }) });
    expect(res.status).toBe(201);
    expect((await c.waitForMessages(eu, 1))[0]).toMatchObject({ data: 'still live' });
    // A refresh without a claim lifts the restriction again.
    const { cap: _wide, ...plain } = identity;
    const open = issueToken(verifier, { ...plain, expiresAt: identity.expiresAt + 120 });
    expect(await c.request({ type: 'auth', token: open.token })).toMatchObject({ type: 'authenticated' });
    expect(await c.request({ type: 'subscribe', topic: us })).toMatchObject({ type: 'subscribed' });
    expect(await c.request({ type: 'subscribe', topic: topicFor(tenantId, 'billing') })).toMatchObject({ type: 'subscribed' });
  });

  it("a tenant's new rules, applied from the feed by both instances, decide the next frame on either; live subscriptions stay", async () => {
    const tenantId = randomUUID();
    const news = topicFor(tenantId, 'news');
    const { c: onA } = await connect(a, ALICE, undefined, tenantId);
    const { c: onB } = await connect(b, BOB, undefined, tenantId);
    expect(await onB.request({ type: 'subscribe', topic: news })).toMatchObject({ type: 'subscribed' });
    expect(await onA.request({ type: 'publish', topic: news, data: 'before' })).toMatchObject({ type: 'published' });
    await onB.waitForMessages(news, 1);
    // What the registry does for PUT /admin/tenants/{id}/channel_rules: store, then every instance applies the feed change before the 200.
    rules.set(tenantId, TENANT_RULES);
    const change = { tenant_id: tenantId, kind: 'channel_rules' as const, version: 1, revoked_key_versions: [], detail: { rules: TENANT_RULES, rules_version: 1 } };
    await Promise.all([a.feed.push(change), b.feed.push(change)]);
    expect(await onA.request({ type: 'publish', topic: news, data: 'after' })).toMatchObject({ type: 'error', code: 'forbidden_channel' });
    expect(await onB.request({ type: 'subscribe', topic: topicFor(tenantId, 'locked') })).toMatchObject({ type: 'error', code: 'forbidden_channel' });
    expect(await onB.request({ type: 'publish', topic: topicFor(tenantId, 'chat:room-1'), data: 'chat' })).toMatchObject({ type: 'published' });
    // Back to the default: publishing to news works again, and bob's subscription from before both changes still delivers.
    const other = issueToken(verifier, { tenantId, userId: CAROL }).identity;
    rules.set(tenantId, null);
    const reset = { ...change, detail: { rules: { default: ['subscribe', 'publish', 'history', 'presence'], channels: [] }, rules_version: 2 } };
    await Promise.all([a.feed.push(reset), b.feed.push(reset)]);
    const res = await fetch(`${a.http}/api/v1/channels/news/messages`, { method: 'POST', headers: gatewayHeaders(other), body: JSON.stringify({ data: 'reset' }) });
    expect(res.status).toBe(201);
    expect((await onB.waitForMessages(news, 2))[1]).toMatchObject({ data: 'reset' });
    // A change older than what an instance holds is ignored there.
    await a.feed.push(change);
    expect(await onA.request({ type: 'publish', topic: news, data: 'still open' })).toMatchObject({ type: 'published' });
  });

  it('refuses a subscribe or publish with unavailable while the registry cannot say what the rules are; the connection stays', async () => {
    const tenantId = randomUUID();
    rules.failing = true;
    try {
      const { c } = await connect(b, ALICE, undefined, tenantId);
      const topic = topicFor(tenantId, 'news');
      expect(await c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'error', code: 'unavailable' });
      expect(await c.request({ type: 'publish', topic, data: 1 })).toMatchObject({ type: 'error', code: 'unavailable' });
      rules.failing = false;
      expect(await c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
      expect(c.isOpen).toBe(true);
    } finally {
      rules.failing = false;
    }
  });
});
