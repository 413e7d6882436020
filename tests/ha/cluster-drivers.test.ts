import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger, createRateLimiter, createRedis, ManualClock, redisReady, type Redis } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisTenantEventBus } from '../../packages/tenant-events/src/redis-tenant-event-bus';
import { tenantEventBusContract } from '../../packages/tenant-events/src/tenant-event-bus.contract';
import { KeyCipher } from '../../services/auth-verifier/src/keys/key-cipher';
import { RedisKeyCache } from '../../services/auth-verifier/src/keys/redis-key-cache';
import type { TenantKeysData } from '../../services/auth-verifier/src/token/tenant-keys';
import { RedisTenantConnections } from '../../services/realtime/src/limits/redis-tenant-connections';
import { tenantConnectionsContract } from '../../services/realtime/src/limits/tenant-connections.contract';
import { describeMessageBusContract } from '../../services/realtime/src/messaging/message-bus-contract';
import { RedisMessageBus } from '../../services/realtime/src/messaging/redis-message-bus';
import { presenceStoreContract, recordEvents } from '../../services/realtime/src/presence/presence-store.contract';
import { sweepIntervalMs } from '../../services/realtime/src/presence/presence-store';
import { RedisPresenceStore } from '../../services/realtime/src/presence/redis-presence-store';
import { ManualScheduler } from '../../services/realtime/src/timers/scheduler';
import { PrivateRedisCluster } from './support/redis-cluster';

// The Redis drivers' own contract suites (the ones `int` runs on one server),
// run again on a private three-master Redis Cluster reached through a
// `redis-cluster://` URL: every multi-key script and command must stay in one
// slot (hash tags), and pub/sub must reach subscribers on whichever node.
const logger = createLogger({ service: 'ha-cluster', level: 'silent' });
let cluster: PrivateRedisCluster;
const clients: Redis[] = [];
const closers: Array<() => Promise<void>> = [];
const prefixes: string[] = [];

function prefix(label: string): string {
  const p = `ha:${label}:${randomBytes(4).toString('hex')}:`;
  prefixes.push(p);
  return p;
}

async function client(extra: Parameters<typeof createRedis>[1] = {}): Promise<Redis> {
  const r = createRedis(cluster.url, extra);
  r.on('error', () => {});
  clients.push(r);
  await redisReady(r, 10_000);
  return r;
}

beforeAll(async () => {
  cluster = await PrivateRedisCluster.start(3);
});

afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
  for (const r of clients) r.disconnect();
  await cluster?.stop();
});

describe('Redis Cluster: the URL builds a cluster client', () => {
  it('spreads keys over the three masters and answers on every one', async () => {
    const r = await client();
    const nodes = (r as unknown as { nodes(role: string): Redis[] }).nodes('master');
    expect(nodes).toHaveLength(3);
    const slots = (await r.cluster('SLOTS')) as unknown[];
    expect(slots.length).toBe(3);
  });
});

describeMessageBusContract('redis cluster', async (maxMessages) => {
  const p = prefix('rt');
  const retention = { maxMessages, ttlS: 60 };
  const pair = (): [RedisMessageBus, RedisMessageBus] => [new RedisMessageBus(cluster.url, p, retention, logger), new RedisMessageBus(cluster.url, p, retention, logger)];
  return {
    buses: pair(),
    async loseEverything() {
      await cluster.deletePrefix(p);
      return pair();
    },
  };
});

describe('RedisTenantEventBus on a Redis Cluster', () => {
  tenantEventBusContract({
    async create(n) {
      const p = prefix('bus');
      return {
        publisher: new RedisTenantEventBus(cluster.url, p, logger),
        consumers: Array.from({ length: n }, () => new RedisTenantEventBus(cluster.url, p, logger)),
      };
    },
  });
});

const settleAll = () => Promise.all(clients.map((r) => r.ping().catch(() => undefined))).then(() => undefined);

tenantConnectionsContract('redis cluster (two instances)', {
  async make(limit) {
    const clock = new ManualScheduler(Date.now());
    const p = prefix('conns');
    const make = async () => {
      const c = new RedisTenantConnections({ redis: await client(), prefix: p, limit, scheduler: clock, logger, heartbeatMs: 10_000, ttlMs: 30_000 });
      closers.push(() => c.close());
      return c;
    };
    return { a: await make(), b: await make() };
  },
  settle: settleAll,
});

describe('RedisTenantConnections heartbeat on a Redis Cluster', () => {
  it('rewrites the counts of tenants whose keys live on different masters', async () => {
    const clock = new ManualScheduler(Date.now());
    const p = prefix('conns-beat');
    const redis = await client();
    const c = new RedisTenantConnections({ redis, prefix: p, limit: 5, scheduler: clock, logger, heartbeatMs: 10_000, ttlMs: 30_000 });
    closers.push(() => c.close());
    const tenants = Array.from({ length: 12 }, () => randomUUID());
    for (const t of tenants) expect((await c.acquire(t)).ok).toBe(true);
    const slots = new Set(await Promise.all(tenants.map((t) => redis.cluster('KEYSLOT', `${p}tenant-conns:{${t}}`))));
    expect(slots.size).toBeGreaterThan(1);
    await c.heartbeat();
    const counts = await Promise.all(tenants.map((t) => redis.hlen(`${p}tenant-conns:{${t}}`)));
    expect(counts).toEqual(tenants.map(() => 1));
  });
});

// The command connections auto-pipeline, as createPresenceStore makes them (ioredis groups a turn's commands by slot).
presenceStoreContract('redis cluster (two instances)', {
  async make() {
    const clock = new ManualScheduler(Date.now());
    const p = prefix('presence');
    const instance = async () => {
      const opts = { enableOfflineQueue: true, maxRetriesPerRequest: null };
      const s = new RedisPresenceStore({ redis: await client({ ...opts, enableAutoPipelining: true }), subscriber: await client(opts), prefix: p, ttlMs: 9000, scheduler: clock, logger });
      closers.push(() => s.close());
      await s.tick();
      return s;
    };
    return { a: await instance(), b: await instance(), distinct: true };
  },
});

describe('RedisPresenceStore on a Redis Cluster: an instance swept while alive', () => {
  it('writes its members on channels in different slots again under a new id', async () => {
    const TTL = 9000;
    const p = prefix('presence-swept');
    const opts = { enableOfflineQueue: true, maxRetriesPerRequest: null };
    const make = async (scheduler: ManualScheduler) => {
      const s = new RedisPresenceStore({ redis: await client({ ...opts, enableAutoPipelining: true }), subscriber: await client(opts), prefix: p, ttlMs: TTL, scheduler, logger });
      closers.push(() => s.close());
      await s.tick();
      return s;
    };
    const clock = new ManualScheduler(Date.now());
    const stalledClock = new ManualScheduler(clock.now());
    const stalled = await make(stalledClock);
    const live = await make(clock);
    const tenant = randomUUID();
    const refs = Array.from({ length: 6 }, (_, i) => ({ tenantId: tenant, channel: `presence:room-${i}` }));
    const probe = await client();
    const slots = new Set(await Promise.all(refs.map((r) => probe.cluster('KEYSLOT', `{${r.tenantId}:${r.channel}}`))));
    expect(slots.size).toBeGreaterThan(1);
    const u = randomUUID();
    const seen = await Promise.all(refs.map((r) => recordEvents(live, r)));
    for (const [i, r] of refs.entries()) await stalled.join(r, `c${i}`, u, undefined);
    await Promise.all(seen.map((x) => x.upTo(1)));
    const oldId = stalled.id;
    clock.advance(sweepIntervalMs(TTL));
    await live.tick();
    clock.advance(TTL);
    await live.tick();
    await Promise.all(seen.map((x) => x.upTo(2)));
    stalledClock.set(clock.now());
    await stalled.tick();
    expect(stalled.id).not.toBe(oldId);
    const third = await Promise.all(seen.map(async (x) => (await x.upTo(3))[2]));
    expect(third).toEqual(refs.map(() => ({ type: 'join', userId: u })));
    for (const r of refs) expect(await live.members(r)).toEqual([{ userId: u }]);
    for (const x of seen) x.stop();
  });
});

describe('rate limits and the verifier key cache on a Redis Cluster', () => {
  it('two replicas share one rate-limit window per key', async () => {
    const opts = { limit: 3, windowMs: 60_000, clock: new ManualClock(0), logger, prefix: prefix('rl') };
    const a = createRateLimiter({ ...opts, redis: await client() });
    const b = createRateLimiter({ ...opts, redis: await client() });
    const seen = [];
    for (const l of [a, b, a, b]) seen.push((await l.hit('k')).allowed);
    expect(seen).toEqual([true, true, true, false]);
    expect((await b.hit('other')).allowed).toBe(true);
  });

  it('the key cache round-trips, refuses a write below the floor after a drop, and a dropAll orphans every entry', async () => {
    const cipher = new KeyCipher(randomBytes(32));
    const p = prefix('verifier');
    const make = async () => {
      const c = new RedisKeyCache({ url: cluster.url, prefix: p, cipher, floorTtlMs: 60_000, logger });
      closers.push(() => c.close());
      await c.start();
      return c;
    };
    const [a, b] = [await make(), await make()];
    const data = (version: number): TenantKeysData => ({ found: true, disabled: false, version, primary: { secret: `s-${version}-${randomUUID()}`, keyVersion: version } });
    const tenants = Array.from({ length: 6 }, () => randomUUID());
    for (const t of tenants) await a.put(t, data(2), 30_000);
    for (const t of tenants) expect((await b.get(t))?.data.version).toBe(2);
    await b.drop(tenants[0]!, 3);
    expect(await a.get(tenants[0]!)).toBeUndefined();
    await a.put(tenants[0]!, data(2), 30_000);
    expect(await b.get(tenants[0]!), 'a write below the floor is refused').toBeUndefined();
    await a.dropAll();
    for (const t of tenants) expect(await b.get(t)).toBeUndefined();
  });
});
