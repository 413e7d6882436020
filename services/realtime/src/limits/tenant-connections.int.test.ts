import { randomUUID } from 'node:crypto';
import { createLogger, createRedis, redisReady } from '@service-relay/core';
import { deleteRedisPrefix, FakeVerifier, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualScheduler } from '../timers/scheduler';
import { issueToken, startRealtime, type RealtimeInstance } from '../test-support/realtime-harness';
import { refusedConnection } from '../test-support/refused-connection';
import { WsTestClient } from '../test-support/ws-test-client';
import { CLOSE_TOO_MANY_CONNECTIONS } from '../ws/close-codes';
import { RedisTenantConnections } from './redis-tenant-connections';

// MAX_CONNECTIONS_PER_TENANT counts across two realtime instances on one real Redis, as two processes would.
describe('MAX_CONNECTIONS_PER_TENANT across two instances on one Redis', () => {
  const verifier = new FakeVerifier();
  const clock = new ManualScheduler(Date.now());
  const prefix = uniqueRedisPrefix('tenant-limit');
  let a: RealtimeInstance;
  let b: RealtimeInstance;
  let bStopped = false;
  const clients: WsTestClient[] = [];
  const token = (tenantId: string) => issueToken(verifier, { tenantId, expiresAt: Math.floor(clock.now() / 1000) + 3600 }).token;
  const connect = async (rt: RealtimeInstance, tenantId: string) => {
    const c = await WsTestClient.connect(rt.ws, token(tenantId));
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    await verifier.start();
    const env = { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix, MAX_CONNECTIONS_PER_TENANT: '2' };
    [a, b] = await Promise.all([startRealtime({ verifier, env, clock }), startRealtime({ verifier, env, clock })]);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all([a.stop(), bStopped ? undefined : b.stop()]);
    await verifier.stop();
    await deleteRedisPrefix(prefix);
  });

  it('refuses the tenant\u2019s third connection on either instance with the limit, and frees the slots of a stopped instance', async () => {
    const tenantId = randomUUID();
    await connect(a, tenantId);
    await connect(b, tenantId);
    for (const rt of [a, b]) {
      const refused = await refusedConnection(rt.ws, token(tenantId));
      expect(refused.frames).toEqual([{ type: 'error', code: 'too_many_connections', limit: 2, retry_after_ms: 5000 }]);
      expect(refused.close.code).toBe(CLOSE_TOO_MANY_CONNECTIONS);
    }
    // Another tenant has its own count.
    const other = randomUUID();
    await connect(a, other);
    await connect(b, other);
    // A clean stop gives back B's slots at once (not one TTL later).
    await b.stop();
    bStopped = true;
    expect((await connect(a, tenantId)).frames[0]).toMatchObject({ type: 'ready', tenant_id: tenantId });
    expect((await refusedConnection(a.ws, token(tenantId))).close.code).toBe(CLOSE_TOO_MANY_CONNECTIONS);
    expect((await connect(a, other)).frames[0]).toMatchObject({ type: 'ready', tenant_id: other });
  });

  it('stops counting a killed instance’s connections once its heartbeat deadline passes', async () => {
    // A third instance that took two slots and was then SIGKILLed: it never
    // heartbeats again (its own clock never moves) and never releases.
    const redis = createRedis(TEST_REDIS_URL);
    await redisReady(redis);
    const killed = new RedisTenantConnections({ redis, prefix, limit: 2, scheduler: new ManualScheduler(clock.now()), logger: createLogger({ service: 't', level: 'silent' }) });
    const tenantId = randomUUID();
    try {
      expect((await killed.acquire(tenantId)).ok).toBe(true);
      expect((await killed.acquire(tenantId)).ok).toBe(true);
      expect((await refusedConnection(a.ws, token(tenantId))).close.code).toBe(CLOSE_TOO_MANY_CONNECTIONS);
      // 30 s without a heartbeat: its count no longer stands.
      clock.advance(30_001);
      expect((await connect(a, tenantId)).frames[0]).toMatchObject({ type: 'ready', tenant_id: tenantId });
    } finally {
      redis.disconnect();
    }
  });
});
