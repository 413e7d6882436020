import { randomUUID } from 'node:crypto';
import { createLogger, createRedis, redisReady, type Redis } from '@service-relay/core';
import { deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from '@service-relay/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualScheduler } from '../timers/scheduler';
import { presenceStoreContract, recordEvents } from './presence-store.contract';
import { ghostBoundMs, sweepIntervalMs } from './presence-store';
import { RedisPresenceStore } from './redis-presence-store';

const logger = createLogger({ service: 't', level: 'silent' });
const prefix = uniqueRedisPrefix('presence');
const clients: Redis[] = [];
const stores: RedisPresenceStore[] = [];
const TTL = 9000;

async function client(autoPipelining = false): Promise<Redis> {
  const r = createRedis(TEST_REDIS_URL, { enableOfflineQueue: true, maxRetriesPerRequest: null, enableAutoPipelining: autoPipelining });
  clients.push(r);
  await redisReady(r);
  return r;
}

/** One instance: its own two connections, like a process of its own (commands auto-pipelined, as createPresenceStore makes them). */
async function instance(scheduler: ManualScheduler): Promise<RedisPresenceStore> {
  const s = new RedisPresenceStore({ redis: await client(true), subscriber: await client(), prefix, ttlMs: TTL, scheduler, logger });
  stores.push(s);
  await s.tick();
  return s;
}

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  for (const r of clients) r.disconnect();
  await deleteRedisPrefix(prefix);
});

presenceStoreContract('redis (two instances)', {
  async make() {
    const clock = new ManualScheduler(Date.now());
    return { a: await instance(clock), b: await instance(clock), distinct: true };
  },
});

describe('RedisPresenceStore: an instance that stops without leaving', () => {
  const ref = () => ({ tenantId: randomUUID(), channel: 'presence:room' });

  it('its members stay while its last beat is younger than the TTL, and are swept by exactly one instance after, with one leave each', async () => {
    const clock = new ManualScheduler(Date.now());
    // The dead instance's clock never moves: it never beats again, as after a SIGKILL.
    const dead = await instance(new ManualScheduler(clock.now()));
    const [live1, live2] = [await instance(clock), await instance(clock)];
    const r = ref();
    const [ghost, shared, marker] = [randomUUID(), randomUUID(), randomUUID()];
    const seen = await recordEvents(live1, r);
    await dead.join(r, 'c1', ghost, '{"n":1}');
    await dead.join(r, 'c2', shared, undefined);
    await live2.join(r, 'c3', shared, undefined);
    await seen.upTo(2);
    clock.advance(TTL - 1);
    await Promise.all([live1.tick(), live2.tick()]);
    expect((await live1.members(r)).map((m) => m.userId).sort()).toEqual([ghost, shared].sort());
    clock.advance(sweepIntervalMs(TTL) + 1);
    await Promise.all([live1.tick(), live2.tick()]);
    expect(await seen.upTo(3)).toContainEqual({ type: 'leave', userId: ghost });
    expect(await live2.members(r)).toEqual([{ userId: shared, dataJson: undefined }]);
    // A later event: any second sweep of the dead instance would have come before it.
    await live2.join(r, 'c4', marker, undefined);
    expect(await seen.upTo(4)).toEqual([
      { type: 'join', userId: ghost, dataJson: '{"n":1}' },
      { type: 'join', userId: shared, dataJson: undefined },
      { type: 'leave', userId: ghost },
      { type: 'join', userId: marker, dataJson: undefined },
    ]);
    expect(ghostBoundMs(TTL)).toBe(TTL + 3000);
    seen.stop();
  });

  it('after a gap in its own beats longer than the TTL (Redis was away for everyone), an instance judges no other before they could beat again', async () => {
    const [clockA, clockB] = [new ManualScheduler(Date.now()), new ManualScheduler(Date.now())];
    const [a, b] = [await instance(clockA), await instance(clockB)];
    const r = ref();
    const [u, marker] = [randomUUID(), randomUUID()];
    const seen = await recordEvents(a, r);
    await b.join(r, 'c1', u, undefined);
    await seen.upTo(1);
    // Neither beat for two TTLs; a gets through first and finds b's beat stale, but must not judge it yet.
    clockA.advance(2 * TTL);
    await a.tick();
    clockB.advance(2 * TTL);
    await b.tick();
    await Promise.all([a.tick(), b.tick()]);
    // A beat interval later both judge again, and find each other alive.
    clockA.advance(sweepIntervalMs(TTL));
    clockB.advance(sweepIntervalMs(TTL));
    await Promise.all([a.tick(), b.tick()]);
    await a.join(r, 'c2', marker, undefined);
    expect(await seen.upTo(2)).toEqual([
      { type: 'join', userId: u, dataJson: undefined },
      { type: 'join', userId: marker, dataJson: undefined },
    ]);
    expect((await a.members(r)).map((m) => m.userId).sort()).toEqual([u, marker].sort());
    seen.stop();
  });

  it('with Redis unreachable a join and a listing are refused with unavailable, within the deadline; a leave and close do not throw', async () => {
    const down = createRedis('redis://127.0.0.1:1', { retryStrategy: () => null, lazyConnect: true });
    down.on('error', () => {});
    clients.push(down);
    const s = new RedisPresenceStore({ redis: down, subscriber: down, prefix, ttlMs: TTL, scheduler: new ManualScheduler(Date.now()), logger, deadlineMs: 100 });
    const r = ref();
    const started = Date.now();
    await expect(s.join(r, 'c1', randomUUID(), undefined)).rejects.toMatchObject({ code: 'unavailable' });
    await expect(s.members(r)).rejects.toMatchObject({ code: 'unavailable' });
    expect(Date.now() - started).toBeLessThan(2000);
    await s.leave(r, 'c1');
    await s.close();
  });

  it('an instance that stalled past the TTL and was swept writes its members again under a new id', async () => {
    const clock = new ManualScheduler(Date.now());
    const stalledClock = new ManualScheduler(clock.now());
    const stalled = await instance(stalledClock);
    const live = await instance(clock);
    const r = ref();
    const u = randomUUID();
    const seen = await recordEvents(live, r);
    await stalled.join(r, 'c1', u, '{"x":true}');
    await seen.upTo(1);
    const oldId = stalled.id;
    clock.advance(sweepIntervalMs(TTL));
    await live.tick();
    clock.advance(TTL);
    await live.tick();
    expect((await seen.upTo(2))[1]).toEqual({ type: 'leave', userId: u });
    // It wakes up: its next beat finds it swept.
    stalledClock.set(clock.now());
    await stalled.tick();
    expect(stalled.id).not.toBe(oldId);
    expect((await seen.upTo(3))[2]).toEqual({ type: 'join', userId: u, dataJson: '{"x":true}' });
    expect(await live.members(r)).toEqual([{ userId: u, dataJson: '{"x":true}' }]);
    await stalled.leave(r, 'c1');
    expect((await seen.upTo(4))[3]).toEqual({ type: 'leave', userId: u });
    seen.stop();
  });
});
