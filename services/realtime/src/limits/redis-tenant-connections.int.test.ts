import { randomUUID } from 'node:crypto';
import { createLogger, createRedis, redisReady, type Redis } from '@service-relay/core';
import { deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualScheduler } from '../timers/scheduler';
import { MAX_SPARE_SLOTS, RedisTenantConnections } from './redis-tenant-connections';
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
// (The unreachable one of the outage test is left out.)
const settle = () => Promise.all(clients.filter((r) => r.status === 'ready').map((r) => r.ping())).then(() => undefined);
/** Releases are written at the end of their tick: that, then what was written. */
const settleReleases = () => new Promise((r) => setImmediate(r)).then(settle);

/** Counts the acquire calls a counter sends to Redis. */
function countAcquireCalls(redis: Redis): { calls: number } {
  const counted = { calls: 0 };
  const target = redis as unknown as { relayTenantAcquire: (...args: unknown[]) => Promise<unknown> };
  const call = target.relayTenantAcquire.bind(redis);
  target.relayTenantAcquire = (...args) => {
    counted.calls += 1;
    return call(...args);
  };
  return counted;
}

const slotsOf = async (redis: Redis, tenant: string) => (await redis.hvals(`${prefix}tenant-conns:{${tenant}}`)).map((v) => Number(v.split(':')[0]));

/** Acquires one at a time until refused (bounded); the slots admitted. */
async function fill(c: RedisTenantConnections, tenant: string, most: number) {
  const slots = [];
  for (let i = 0; i < most; i++) {
    const r = await c.acquire(tenant);
    if (!r.ok) break;
    slots.push(r.slot);
  }
  return slots;
}

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

  it('forgets a deleted tenant: its key goes, and neither a heartbeat nor its last connections closing write it again', async () => {
    const clock = new ManualScheduler(Date.now());
    const redis = await client();
    const a = await counter(100, clock, redis);
    const tenant = randomUUID();
    const admitted = await a.acquire(tenant);
    if (!admitted.ok) throw new Error('refused');
    await settle();
    const key = `${prefix}tenant-conns:{${tenant}}`;
    expect(await redis.exists(key)).toBe(1);
    await a.forget(tenant);
    expect(await redis.exists(key)).toBe(0);
    // The connection is still closing: a heartbeat meanwhile writes nothing of the tenant.
    clock.advance(10_000);
    await a.heartbeat();
    await settle();
    expect(await redis.exists(key)).toBe(0);
    admitted.slot.release();
    await settleReleases();
    expect(await redis.exists(key)).toBe(0);
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

  it('far below the limit, takes spare slots ahead and admits the next connections from them without asking Redis', async () => {
    const clock = new ManualScheduler(Date.now());
    const redis = await client();
    const a = await counter(1000, clock, redis);
    const calls = countAcquireCalls(redis);
    const tenant = randomUUID();
    for (let i = 0; i < 1 + MAX_SPARE_SLOTS; i++) expect((await a.acquire(tenant)).ok).toBe(true);
    expect(calls.calls).toBe(1);
    // Recorded as taken, so every other instance counts them.
    expect(await slotsOf(redis, tenant)).toEqual([1 + MAX_SPARE_SLOTS]);
    expect((await a.acquire(tenant)).ok).toBe(true);
    expect(calls.calls).toBe(2);
  });

  it('connections that come in one tick ask in one call, admitted in order up to the limit', async () => {
    const clock = new ManualScheduler(Date.now());
    const redis = await client();
    const a = await counter(20, clock, redis);
    const calls = countAcquireCalls(redis);
    const tenant = randomUUID();
    const results = await Promise.all(Array.from({ length: 25 }, () => a.acquire(tenant)));
    expect(calls.calls).toBe(1);
    expect(results.map((r) => r.ok)).toEqual([...Array<boolean>(20).fill(true), ...Array<boolean>(5).fill(false)]);
    // The refused ones' slots were given back: 20 recorded, no spare at the limit.
    expect(await slotsOf(redis, tenant)).toEqual([20]);
  });

  it('spare slots never pass the limit; the ones another instance holds refuse early only until its heartbeat gives them back', async () => {
    const clock = new ManualScheduler(Date.now());
    const a = await counter(100, clock);
    const b = await counter(100, clock);
    const tenant = randomUUID();
    expect((await a.acquire(tenant)).ok).toBe(true);
    // a holds 1 and an eighth of the 99 left as spare: 13 recorded.
    const first = await fill(b, tenant, 200);
    expect(first).toHaveLength(87);
    // Near the limit a keeps at most an eighth of the room left: each heartbeat gives back more.
    await a.heartbeat();
    const second = await fill(b, tenant, 200);
    await a.heartbeat();
    const third = await fill(b, tenant, 200);
    expect(1 + first.length + second.length + third.length).toBe(100);
    expect(await b.acquire(tenant)).toEqual({ ok: false, limit: 100 });
  });

  it('a release near the limit is written at once; the last connection here going removes this instance from the count', async () => {
    const clock = new ManualScheduler(Date.now());
    const redis = await client();
    const a = await counter(20, clock, redis);
    const b = await counter(20, clock);
    const tenant = randomUUID();
    const mine = await fill(a, tenant, 10);
    const theirs = await fill(b, tenant, 20);
    expect(mine.length + theirs.length).toBe(20);
    expect((await b.acquire(tenant)).ok).toBe(false);
    mine[0]!.release();
    await settleReleases();
    expect((await b.acquire(tenant)).ok).toBe(true);

    const other = randomUUID();
    const lone = await a.acquire(other);
    if (!lone.ok) throw new Error('refused');
    expect(await slotsOf(redis, other)).toEqual([1 + 2]);
    lone.slot.release();
    await settleReleases();
    expect(await slotsOf(redis, other)).toEqual([]);
  });
});
