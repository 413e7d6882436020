import { randomUUID } from 'node:crypto';
import { FakeVerifier } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueToken, startRealtime, TEST_INTERNAL_TOKEN, topicFor, type RealtimeInstance } from '../test-support/realtime-harness';
import { WsTestClient } from '../test-support/ws-test-client';

describe('GET /internal/live (the registry reads it for the operator console)', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const live = (headers: Record<string, string> = { 'x-internal-token': TEST_INTERNAL_TOKEN }, method = 'GET') => fetch(`${rt.http}/internal/live`, { method, headers });

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt.stop();
    await verifier.stop();
  });

  it('refuses a caller without the internal token, and any method but GET', async () => {
    for (const h of [{}, { 'x-internal-token': 'wrong-token-wrong-token-wrong-token' }] as Array<Record<string, string>>) {
      const res = await live(h);
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ errors: ['invalid_internal_token'] });
    }
    const post = await live(undefined, 'POST');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
  });

  it('counts connections per tenant and the busiest channels with their presence, and nothing else', async () => {
    const [a, b] = [randomUUID(), randomUUID()];
    const sockets = await Promise.all([a, a, b].map((t, i) => WsTestClient.connect(rt.ws, issueToken(verifier, { tenantId: t, userId: `u${i}` }).token)));
    await sockets[0]!.request({ type: 'subscribe', topic: topicFor(a, 'presence:room') });
    await sockets[1]!.request({ type: 'subscribe', topic: topicFor(a, 'presence:room') });
    await sockets[2]!.request({ type: 'subscribe', topic: topicFor(b, 'news') });
    const res = await live();
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ feed_current: true, connections: 3, channels_open: 2 });
    expect(typeof body.instance_id).toBe('string');
    expect(body.tenants).toEqual([
      { tenant_id: a, connections: 2 },
      { tenant_id: b, connections: 1 },
    ]);
    expect(body.channels).toEqual([
      { tenant_id: a, channel: 'presence:room', subscribers: 2, presence: 2 },
      { tenant_id: b, channel: 'news', subscribers: 1, presence: 0 },
    ]);
    await Promise.all(sockets.map((s) => s.close()));
  });
});
