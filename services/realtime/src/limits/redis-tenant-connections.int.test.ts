import { randomUUID } from 'node:crypto';
import { createLogger, createRedis, redisReady, type Redis } from '@service-relay/core';
import { deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualScheduler } from '../realtime/scheduler';
import { RedisTenantConnections } from './redis-tenant-connections';
import { tenantConnectionsContract } from './tenant-connections.contract';

const logger = createLogger({ service: 't', level: 'silent' });
const prefix = uniqueRedisPrefix('tenant-conns');
const clients: Redis[] = [];
const counters: RedisTenantConnections[] = [];

async function client(): Promise<Redis> {
  const r = createRedis(TEST_REDIS_URL);
  clients.push(r);
  await redisReady(r);
  return r;
}

async function counter(limit: number, scheduler: ManualScheduler, redis?: Redis): Promise<RedisTenantConnections> {
  const c = new RedisTenantConnections({ redis: redis ?? (await client()), prefix, limit, scheduler, logger, heartbeatMs: 10_000, ttlMs: 30_000 });
  counters.push(c);
  return c;
}

afterAll(async () => {
  await Promise.all(counters.map((c) => c.close()));
  for (const r of clients) r.disconnect();
  await deleteRedisPrefix(prefix);
});

// Every command of one client runs in order: a PING answered means the writes before it are done.
const settle = () => Promise.all(clients.map((r) => r.ping())).then(() => undefined);

tenantConnectionsContract('redis (two instances)', {
  async make(limit) {
    const clock = new ManualScheduler(Date.now());
    return { a: await counter(limit, clock), b: await counter(limit, clock) };
  },
  settle,
});

describe('RedisTenantConnections across instances', () => {
  it('stops counting an instance that died without releasing once its heartbeats stop for the TTL', async () => {
    const clock = new ManualScheduler(Date.now());
    // The dead instance's own clock never moves: its heartbeat never fires again, as after a SIGKILL.
    const dead = await counter(2, new ManualScheduler(clock.now()));
    const live = await counter(2, clock);
    const tenant = randomUUID();
    expect((await dead.acquire(tenant)).ok).toBe(true);
    expect((await live.acquire(tenant)).ok).toBe(true);
    expect(await live.acquire(tenant)).toEqual({ ok: false, limit: 2 });
    clock.advance(29_000);
    await settle();
    expect((await live.acquire(tenant)).ok).toBe(false);
    clock.advance(2_000);
    await settle();
    expect((await live.acquire(tenant)).ok).toBe(true);
    expect(await live.acquire(tenant)).toEqual({ ok: false, limit: 2 });
  });

  it('keeps a live instance counted through its heartbeats, long past the TTL', async () => {
    const clock = new ManualScheduler(Date.now());
    const a = await counter(1, clock);
    const b = await counter(1, clock);
    const tenant = randomUUID();
    expect((await a.acquire(tenant)).ok).toBe(true);
    for (let i = 0; i < 10; i++) {
      clock.advance(10_000);
      await a.heartbeat();
    }
    expect(await b.acquire(tenant)).toEqual({ ok: false, limit: 1 });
  });

  it('with Redis unreachable, holds the limit per instance instead of refusing everyone', async () => {
    const down = createRedis('redis://127.0.0.1:1', { retryStrategy: () => null, lazyConnect: true });
    down.on('error', () => {});
    clients.push(down);
    const c = await counter(2, new ManualScheduler(Date.now()), down);
    const tenant = randomUUID();
    const results = [await c.acquire(tenant), await c.acquire(tenant), await c.acquire(tenant)];
    expect(results.map((r) => r.ok)).toEqual([true, true, false]);
    expect(results[2]).toEqual({ ok: false, limit: 2 });
  });
});
