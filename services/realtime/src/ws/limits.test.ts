import { randomUUID } from 'node:crypto';
import { FakeVerifier, rawExchange } from '@service-relay/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ManualScheduler } from '../timers/scheduler';
import { gatewayHeaders, issueToken, startRealtime, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { refusedConnection } from '../test-support/refused-connection';
import { WsTestClient } from '../test-support/ws-test-client';
import { CLOSE_TOO_MANY_CONNECTIONS } from './close-codes';

/** Every limit's refusal names its number (docs/API.md "Limits"); time moves only by hand. */
describe('realtime limits and the errors that name them', () => {
  const verifier = new FakeVerifier();
  const clock = new ManualScheduler(Date.now());
  let rt: RealtimeInstance;
  const clients: WsTestClient[] = [];
  const connect = async (identity: Parameters<typeof issueToken>[1] = {}) => {
    const { token, identity: id } = issueToken(verifier, { expiresAt: Math.floor(clock.now() / 1000) + 3600, ...identity });
    const c = await WsTestClient.connect(rt.ws, token);
    clients.push(c);
    return { c, id, token };
  };
  const openConnections = async () => (await rt.server.metrics.connections.get()).values[0]?.value ?? 0;

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({
      verifier,
      clock,
      env: { PUBLISH_RATE_PER_S: '2', PUBLISH_BURST: '3', MAX_SUBSCRIPTIONS: '2', AUTH_FRAMES_PER_MINUTE: '2', MAX_CONNECTIONS_PER_TENANT: '2' },
    });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await vi.waitFor(async () => expect(await openConnections()).toBe(0));
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('publish: a burst of PUBLISH_BURST, then rate_limited with the rate and when to retry; the connection stays', async () => {
    const { c, id } = await connect();
    const topic = topicFor(id.tenantId, 'fast');
    for (let i = 0; i < 3; i++) expect(await c.request({ type: 'publish', topic, data: i })).toMatchObject({ type: 'published' });
    const refused = await c.request({ type: 'publish', topic, data: 3 });
    expect(refused).toEqual({ type: 'error', code: 'rate_limited', limit: 2, retry_after_ms: 500, ref: refused.ref });
    clock.advance(499);
    expect(await c.request({ type: 'publish', topic, data: 4 })).toMatchObject({ code: 'rate_limited', retry_after_ms: 1 });
    clock.advance(1);
    expect(await c.request({ type: 'publish', topic, data: 5 })).toMatchObject({ type: 'published' });
    expect(c.isOpen).toBe(true);
    // Each connection has its own bucket.
    const { c: other } = await connect({ tenantId: id.tenantId });
    expect(await other.request({ type: 'publish', topic, data: 6 })).toMatchObject({ type: 'published' });
    // Subscribing is not a publish.
    expect(await c.request({ type: 'subscribe', topic })).toMatchObject({ type: 'subscribed' });
  });

  it('subscribe: too_many_subscriptions names MAX_SUBSCRIPTIONS', async () => {
    const { c, id } = await connect();
    for (const ch of ['a', 'b']) expect(await c.request({ type: 'subscribe', topic: topicFor(id.tenantId, ch) })).toMatchObject({ type: 'subscribed' });
    const refused = await c.request({ type: 'subscribe', topic: topicFor(id.tenantId, 'c') });
    expect(refused).toEqual({ type: 'error', code: 'too_many_subscriptions', limit: 2, ref: refused.ref });
  });

  it('publish: payload_too_large names the 64 KiB data limit', async () => {
    const { c, id } = await connect();
    const refused = await c.request({ type: 'publish', topic: topicFor(id.tenantId, 'big'), data: 'x'.repeat(65_535) });
    expect(refused).toEqual({ type: 'error', code: 'payload_too_large', limit: 65_536, ref: refused.ref });
  });

  it('auth: AUTH_FRAMES_PER_MINUTE, then rate_limited with the limit and the rest of the minute', async () => {
    const { c, id } = await connect();
    const fresh = () => issueToken(verifier, { ...id, expiresAt: Math.floor(clock.now() / 1000) + 7200 }).token;
    expect(await c.request({ type: 'auth', token: fresh() })).toMatchObject({ type: 'authenticated' });
    clock.advance(15_000);
    expect(await c.request({ type: 'auth', token: fresh() })).toMatchObject({ type: 'authenticated' });
    const refused = await c.request({ type: 'auth', token: fresh() });
    expect(refused).toEqual({ type: 'error', code: 'rate_limited', limit: 2, retry_after_ms: 45_000, ref: refused.ref });
    clock.advance(45_000);
    expect(await c.request({ type: 'auth', token: fresh() })).toMatchObject({ type: 'authenticated' });
    // One check in flight: the limit is 1 and the pending reply, not a time, ends it.
    c.send({ type: 'auth', token: fresh(), ref: 'first' });
    c.send({ type: 'auth', token: fresh(), ref: 'second' });
    expect(await c.next((f) => f.ref === 'second')).toEqual({ type: 'error', code: 'rate_limited', limit: 1, ref: 'second' });
    expect(await c.next((f) => f.ref === 'first')).toMatchObject({ type: 'authenticated' });
  });

  it('connect: over MAX_CONNECTIONS_PER_TENANT an error frame with the limit, then close 4429 and no ready; a slot frees on close', async () => {
    const tenantId = randomUUID();
    const { c: first } = await connect({ tenantId });
    await connect({ tenantId });
    const refused = await refusedConnection(rt.ws, issueToken(verifier, { tenantId, expiresAt: Math.floor(clock.now() / 1000) + 3600 }).token);
    expect(refused.frames).toEqual([{ type: 'error', code: 'too_many_connections', limit: 2, retry_after_ms: 5000 }]);
    expect(refused.close).toEqual({ code: CLOSE_TOO_MANY_CONNECTIONS, reason: 'too_many_connections' });
    // The operator learns which tenant (the token never appears in the log).
    const logged = rt.logs.filter((l) => l.includes('tenant connection limit'));
    expect(logged.some((l) => l.includes(tenantId))).toBe(true);
    // Other tenants are not affected.
    await connect();
    await first.close();
    clients.splice(clients.indexOf(first), 1);
    await vi.waitFor(async () => expect(await openConnections()).toBe(2));
    expect((await connect({ tenantId })).c.frames[0]).toMatchObject({ type: 'ready', tenant_id: tenantId });
  });

  it('connect: a handshake ws refuses after the token was admitted gives its slot back', async () => {
    const tenantId = randomUUID();
    for (let i = 0; i < 2; i++) {
      const bearer = issueToken(verifier, { tenantId, expiresAt: Math.floor(clock.now() / 1000) + 3600 }).token;
      // No Sec-WebSocket-Key: ws answers 400 itself, after the tenant's slot was taken.
      const answer = await rawExchange(rt.server.port, `GET /ws HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\nauthorization: Bearer ${bearer}\r\n\r\n`);
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    }
    await connect({ tenantId });
    expect((await connect({ tenantId })).c.frames[0]).toMatchObject({ type: 'ready', tenant_id: tenantId });
  });

  it('counted each refusal above by its limit, for operators', async () => {
    const text = await rt.server.metrics.registry.metrics();
    for (const limit of ['publish_rate', 'subscriptions', 'payload_size', 'auth_frames', 'tenant_connections']) {
      expect(text).toMatch(new RegExp(`relay_realtime_limit_refusals_total\\{[^}]*limit="${limit}"[^}]*\\} [1-9]`));
    }
  });

  it('REST: a 413 keeps the contract body and carries the data limit in X-Relay-Limit', async () => {
    const { identity } = issueToken(verifier);
    const res = await fetch(`${rt.http}/api/v1/channels/big/messages`, { method: 'POST', headers: gatewayHeaders(identity), body: JSON.stringify({ data: 'x'.repeat(65_535) }) });
    expect(res.status).toBe(413);
    expect(res.headers.get('x-relay-limit')).toBe('65536');
    expect(await res.text()).toBe('{"errors":["payload_too_large"]}');
    const oversize = await fetch(`${rt.http}/api/v1/channels/big/messages`, { method: 'POST', headers: gatewayHeaders(identity), body: JSON.stringify({ data: 'x'.repeat(300_000) }) });
    expect(oversize.status).toBe(413);
    expect(oversize.headers.get('x-relay-limit')).toBe('65536');
    expect(await oversize.text()).toBe('{"errors":["payload_too_large"]}');
  });
});

/** Opens a WebSocket expected to be refused after the upgrade: every frame it got, and its close. */
