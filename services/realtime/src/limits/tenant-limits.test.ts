import { FakeVerifier } from '@service-relay/testkit';
import type { PartialLimits } from '@service-relay/tenant-events';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualScheduler } from '../timers/scheduler';
import { MemoryLimitsSource } from '../test-support/memory-limits-source';
import { MemoryRulesSource } from '../test-support/memory-rules-source';
import { gatewayHeaders, issueToken, startRealtime, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { refusedConnection } from '../test-support/refused-connection';
import { WsTestClient } from '../test-support/ws-test-client';
import { CLOSE_TOO_MANY_CONNECTIONS } from '../ws/close-codes';

/**
 * Per-tenant limits on one embedded instance (#30): the registry's answer on
 * first use, a `limits` feed change in force for the next request, each
 * refused at its number and not one before, the refusal hook told. Time moves only by hand.
 */
describe('per-tenant limits (one instance, embedded drivers)', () => {
  const verifier = new FakeVerifier();
  const clock = new ManualScheduler(Date.now());
  const source = new MemoryLimitsSource();
  const rules = new MemoryRulesSource();
  let rt: RealtimeInstance;
  const refused: Array<[string, string]> = [];
  const clients: WsTestClient[] = [];
  const tenant = (limits: PartialLimits) => {
    const { identity } = issueToken(verifier);
    source.set(identity.tenantId, limits);
    return identity.tenantId;
  };
  const connect = async (tenantId: string, userId?: string) => {
    const { token, identity } = issueToken(verifier, { tenantId, expiresAt: Math.floor(clock.now() / 1000) + 3600, ...(userId && { userId }) });
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return { c, identity };
  };
  const rest = (identity: Parameters<typeof gatewayHeaders>[0], channel: string, data: unknown) =>
    fetch(`${rt.http}/api/v1/channels/${channel}/messages`, { method: 'POST', headers: { ...gatewayHeaders(identity), 'content-type': 'application/json' }, body: JSON.stringify({ data }) });

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier, clock, limitsSource: source, channelRules: rules, env: { PUBLISH_RATE_PER_S: '1000', PUBLISH_BURST: '1000' } });
    rt.server.refusals.on((t, limit) => refused.push([t, limit]));
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('connections: the tenant max_connections-th is admitted, the next refused with its number', async () => {
    const t = tenant({ max_connections: 2 });
    await connect(t);
    await connect(t);
    const over = await refusedConnection(rt.ws, issueToken(verifier, { tenantId: t, expiresAt: Math.floor(clock.now() / 1000) + 3600 }).token);
    expect(over.frames).toEqual([{ type: 'error', code: 'too_many_connections', limit: 2, retry_after_ms: 5000 }]);
    expect(over.close.code).toBe(CLOSE_TOO_MANY_CONNECTIONS);
    expect(refused).toContainEqual([t, 'tenant_connections']);
  });

  it('tenant publish rate: WebSocket and REST draw from one bucket of publish_burst, refused with the rate and Retry-After', async () => {
    const t = tenant({ publish_rate_per_s: 2, publish_burst: 4 });
    const { c, identity } = await connect(t);
    const topic = topicFor(t, 'rate');
    for (let i = 0; i < 2; i++) expect(await c.request({ type: 'publish', topic, data: i })).toMatchObject({ type: 'published' });
    for (let i = 0; i < 2; i++) expect((await rest(identity, 'rate', i)).status).toBe(201);
    const ws = await c.request({ type: 'publish', topic, data: 'over' });
    expect(ws).toEqual({ type: 'error', code: 'rate_limited', limit: 2, retry_after_ms: 500, ref: ws.ref });
    const res = await rest(identity, 'rate', 'over');
    expect([res.status, res.headers.get('retry-after'), res.headers.get('x-relay-limit'), await res.json()]).toEqual([429, '1', '2', { errors: ['rate_limited'] }]);
    clock.advance(500);
    expect((await rest(identity, 'rate', 'again')).status).toBe(201);
    expect(refused.filter(([x, l]) => x === t && l === 'tenant_publish_rate')).toHaveLength(2);
  });

  it('connection publish rate, subscriptions and the largest message follow the tenant, a limits change in force for the next request', async () => {
    const t = tenant({ connection_publish_rate_per_s: 1, connection_publish_burst: 2, max_subscriptions: 1, max_message_bytes: 10 });
    const { c, identity } = await connect(t);
    const topic = topicFor(t, 'a');
    expect(await c.request({ type: 'publish', topic, data: '12345678' })).toMatchObject({ type: 'published' });
    const big = await c.request({ type: 'publish', topic, data: '123456789' });
    expect(big).toEqual({ type: 'error', code: 'payload_too_large', limit: 10, ref: big.ref });
    const bigRest = await rest(identity, 'a', '123456789');
    expect([bigRest.status, bigRest.headers.get('x-relay-limit')]).toEqual([413, '10']);
    const slow = await c.request({ type: 'publish', topic, data: 1 });
    expect(slow).toEqual({ type: 'error', code: 'rate_limited', limit: 1, retry_after_ms: 1000, ref: slow.ref });
    expect(await c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
    const sub = await c.request({ type: 'subscribe', topic: topicFor(t, 'b') });
    expect(sub).toEqual({ type: 'error', code: 'too_many_subscriptions', limit: 1, ref: sub.ref });
    // The operator raises them: the feed change is applied before it counts, and the next frames obey it.
    await rt.feed.push({ tenant_id: t, kind: 'limits', version: 1, revoked_key_versions: [], detail: { limits: { max_subscriptions: 2, max_message_bytes: 20, connection_publish_rate_per_s: 1, connection_publish_burst: 2 }, limits_version: 2, plan: null } });
    expect(await c.request({ type: 'subscribe', topic: topicFor(t, 'b') })).toMatchObject({ type: 'subscribed' });
    clock.advance(1000);
    expect(await c.request({ type: 'publish', topic, data: '123456789' })).toMatchObject({ type: 'published' });
    // An older version never replaces a newer one.
    await rt.feed.push({ tenant_id: t, kind: 'limits', version: 1, revoked_key_versions: [], detail: { limits: { max_subscriptions: 1 }, limits_version: 1, plan: null } });
    expect(await c.request({ type: 'subscribe', topic: topicFor(t, 'c') })).toMatchObject({ code: 'too_many_subscriptions', limit: 2 });
  });

  it('presence members per channel: the max-th user joins, the next is refused, a member joining again is not', async () => {
    const t = tenant({ max_presence_members: 2 });
    rules.set(t, { channels: [{ pattern: 'presence-*', actions: ['subscribe', 'presence'], presence: true }] });
    const topic = topicFor(t, 'presence-room');
    const first = await connect(t);
    expect(await first.c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
    expect(await (await connect(t)).c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
    const third = await (await connect(t)).c.request({ type: 'subscribe', topic });
    expect(third).toEqual({ type: 'error', code: 'too_many_subscriptions', limit: 2, ref: third.ref });
    expect(await (await connect(t, first.identity.userId)).c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
    expect(refused).toContainEqual([t, 'presence_members']);
  });

  it('history keeps the tenant history_max_messages', async () => {
    const t = tenant({ history_max_messages: 3 });
    const { c, identity } = await connect(t);
    const topic = topicFor(t, 'h');
    for (let i = 0; i < 8; i++) expect(await c.request({ type: 'publish', topic, data: i })).toMatchObject({ type: 'published' });
    const res = await fetch(`${rt.http}/api/v1/channels/h/messages?limit=100`, { headers: gatewayHeaders(identity) });
    const page = (await res.json()) as { messages: Array<{ data: number }> };
    // Trimmed in batches like MAXLEN ~: at least 3 stay, never all 8.
    expect(page.messages.length).toBeGreaterThanOrEqual(3);
    expect(page.messages.length).toBeLessThan(8);
  });

  it('a registry that cannot answer leaves the tenant on the environment defaults (fail open), asked again later', async () => {
    source.failing = true;
    try {
      const { identity } = issueToken(verifier);
      expect((await rest(identity, 'x', 1)).status).toBe(201);
    } finally {
      source.failing = false;
    }
    await vi.waitFor(() => expect(rt.logs.some((l) => l.includes('tenant limits not available'))).toBe(true));
  });
});
