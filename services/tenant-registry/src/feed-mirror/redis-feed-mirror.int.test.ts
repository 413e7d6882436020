import { randomBytes, randomUUID } from 'node:crypto';
import { createLogger } from '@service-relay/core';
import { deleteRedisPrefix, TEST_REDIS_URL } from '@service-relay/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import type { FeedChange, FeedPage } from '../store/feed-store';
import type { FeedSource } from './feed-mirror';
import { RedisFeedMirror } from './redis-feed-mirror';

const logger = createLogger({ service: 'test', level: 'silent' });
const change = (seq: number, detail?: Record<string, unknown>): FeedChange => ({ seq, tenantId: randomUUID(), kind: 'disabled', version: seq + 1, revokedKeyVersions: [seq], ...(detail && { detail }) });

/** The outbox, by hand. */
class FakeOutbox implements FeedSource {
  constructor(public changes: FeedChange[] = []) {}
  async latestSeq() {
    return this.changes.length === 0 ? 0 : this.changes[this.changes.length - 1]!.seq;
  }
  async changesSince(after: number, limit: number): Promise<FeedPage> {
    return { latestSeq: await this.latestSeq(), reset: false, changes: this.changes.filter((c) => c.seq > after).slice(0, limit) };
  }
}

describe('RedisFeedMirror (real Redis)', () => {
  const prefixes: string[] = [];
  const mirrors: RedisFeedMirror[] = [];
  const make = (prefix = `t-${randomBytes(4).toString('hex')}:`) => {
    prefixes.push(prefix);
    const m = new RedisFeedMirror(TEST_REDIS_URL, prefix, logger);
    mirrors.push(m);
    return m;
  };
  afterEach(async () => {
    for (const m of mirrors.splice(0)) m.close();
    for (const p of prefixes.splice(0)) await deleteRedisPrefix(p);
  });

  it('holds nothing until a repair starts it; then serves appended changes in order and grants a lease only to a consumer that applied them all', async () => {
    const mirror = make();
    expect(await mirror.append([change(1)])).toEqual({ held: false, degradedForMs: 0 });
    expect(await mirror.read(0, 100, 2000)).toBeUndefined();
    await mirror.repair(new FakeOutbox([change(1), change(2)]));
    // Started at the outbox's latest: nothing before it is held.
    expect(await mirror.read(1, 100, 2000)).toMatchObject({ reset: true, latestSeq: 2 });
    const [c3, c4] = [change(3, { user_id: 'u', before: 5 }), change(4)];
    expect((await mirror.append([c3])).held).toBe(true);
    await mirror.append([c4]);
    const page = await mirror.read(2, 100, 2000);
    expect(page).toMatchObject({ reset: false, latestSeq: 4, granted: false });
    expect(page!.changes).toEqual([c3, c4]);
    expect(await mirror.read(4, 100, 2000)).toMatchObject({ changes: [], latestSeq: 4, granted: true });
    // A new consumer is placed without a lease.
    expect(await mirror.read(-1, 100, 2000)).toMatchObject({ changes: [], latestSeq: 4, granted: false });
  });

  it('is ready only while it holds the feed: Redis answering is not enough', async () => {
    const mirror = make();
    expect(await mirror.read(0, 100, 2000)).toBeUndefined();
    expect(await mirror.ready()).toBe(false);
    await mirror.repair(new FakeOutbox([change(1)]));
    expect(await mirror.ready()).toBe(true);
  });

  it('takes an answer that arrived while the registry was busy past its deadline (event-loop lag is not a Redis fault)', async () => {
    const mirror = make();
    await mirror.repair(new FakeOutbox([change(1)]));
    const page = mirror.read(1, 100, 2000);
    // Redis answers within a millisecond; this process reads it 400 ms later.
    const until = performance.now() + 400;
    while (performance.now() < until);
    await expect(page).resolves.toMatchObject({ latestSeq: 1, granted: true });
  });

  it('counts the leases it granted: a change appended after one learns how long it may still run', async () => {
    const mirror = make();
    await mirror.repair(new FakeOutbox([change(1)]));
    expect((await mirror.append([change(2)])).degradedForMs).toBe(0);
    await mirror.read(2, 100, 2000);
    const after = await mirror.append([change(3)]);
    // The lease (2000 ms) plus the 100 ms margin, less the time since.
    expect(after.degradedForMs).toBeGreaterThan(1500);
    expect(after.degradedForMs).toBeLessThanOrEqual(2100);
  });

  it('never reports past a gap: changes after a missing sequence wait until a repair fills it from the outbox', async () => {
    const mirror = make();
    const outbox = new FakeOutbox([change(1)]);
    await mirror.repair(outbox);
    const [c2, c3] = [change(2), change(3)];
    outbox.changes.push(c2, c3);
    // c2's own append was lost (Redis blinked for its registry); c3's landed.
    await mirror.append([c3]);
    const stuck = await mirror.read(1, 100, 2000);
    expect(stuck).toMatchObject({ latestSeq: 3, changes: [], granted: false });
    await mirror.repair(outbox);
    expect((await mirror.read(1, 100, 2000))!.changes.map((c) => c.seq)).toEqual([2, 3]);
    // The same change appended twice is held once.
    await mirror.append([c2]);
    expect((await mirror.read(1, 100, 2000))!.changes.map((c) => c.seq)).toEqual([2, 3]);
  });

  it('starts over when the outbox is behind it (PostgreSQL lost commits, or another database): consumers ahead get reset', async () => {
    const mirror = make();
    await mirror.repair(new FakeOutbox([change(5)]));
    await mirror.append([change(6), change(7)]);
    await mirror.repair(new FakeOutbox([change(5)]));
    expect(await mirror.read(7, 100, 2000)).toMatchObject({ reset: true, latestSeq: 5 });
    expect(await mirror.read(5, 100, 2000)).toMatchObject({ reset: false, granted: true });
  });

  it('two registries share one mirror', async () => {
    const prefix = `t-${randomBytes(4).toString('hex')}:`;
    const [a, b] = [make(prefix), make(prefix)];
    await a.repair(new FakeOutbox([change(1)]));
    const c2 = change(2);
    await a.append([c2]);
    expect((await b.read(1, 100, 2000))!.changes).toEqual([c2]);
  });
});
