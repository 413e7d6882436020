import { createLogger, ManualClock } from '@service-relay/core';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { MemoryTenantEventBus } from './memory-tenant-event-bus';
import type { TenantEvent } from './tenant-event';
import { TenantFeed, type ChangeSource, type FeedAnswer } from './tenant-feed';

const logger = createLogger({ service: 'test', level: 'silent' });
const T = '6f1c2a9e-8a8b-4c1d-9e2f-0a1b2c3d4e5f';

/** The registry's side in memory: a log of changes, and every request seen. */
class FakeSource implements ChangeSource {
  log: TenantEvent[] = [];
  requests: number[] = [];
  reset = false;
  down = false;
  /** Runs between receiving a request and answering it (to move the clock). */
  onRequest: () => void = () => {};

  commit(kind: TenantEvent['kind'], version = this.log.length + 1): TenantEvent {
    const e: TenantEvent = { seq: this.log.length + 1, tenant_id: T, kind, version, revoked_key_versions: [] };
    this.log.push(e);
    return e;
  }

  async changesSince(req: { appliedSeq: number }): Promise<FeedAnswer> {
    this.requests.push(req.appliedSeq);
    this.onRequest();
    if (this.down) throw new Error('registry down');
    const latestSeq = this.log.length;
    if (this.reset) {
      this.reset = false;
      return { latestSeq, changes: [], reset: true };
    }
    return { latestSeq, changes: req.appliedSeq < 0 ? [] : this.log.filter((e) => e.seq > req.appliedSeq), reset: false };
  }

  close(): void {}
}

function setup(leaseMs = 2000) {
  const source = new FakeSource();
  const clock = new ManualClock(1_000_000);
  const bus = new MemoryTenantEventBus();
  const feed = new TenantFeed('test', { source, bus, leaseMs, pollIntervalMs: 60_000, clock, logger });
  return { source, clock, bus, feed };
}

describe('TenantFeed', () => {
  it('is not current before its first sync, and starts at the latest sequence without replaying history', async () => {
    const { source, feed } = setup();
    source.commit('created');
    source.commit('disabled');
    const seen: number[] = [];
    feed.subscribe((e) => void seen.push(e.seq));
    expect(feed.isCurrent()).toBe(false);
    await feed.start();
    expect(feed.isCurrent()).toBe(true);
    expect(seen).toEqual([]);
    expect(feed.baseSeq()).toBe(2);
    // The first answer only places it; the lease is taken on a request that reported that place.
    expect(source.requests).toEqual([-1, 2]);
    feed.close();
  });

  it('applies changes in order with every handler, then reports them applied on its next request', async () => {
    const { source, feed } = setup();
    await feed.start();
    const order: string[] = [];
    feed.subscribe(async (e) => {
      await new Promise((r) => setImmediate(r));
      order.push(`a${e.seq}`);
    });
    feed.subscribe((e) => void order.push(`b${e.seq}`));
    source.commit('created');
    source.commit('rotated');
    await feed.sync();
    expect(order.sort()).toEqual(['a1', 'a2', 'b1', 'b2']);
    expect(feed.appliedSeq()).toBe(2);
    expect(source.requests.at(-1)).toBe(2);
    expect(feed.isCurrent()).toBe(true);
    feed.close();
  });

  it('pulls at once when the bus announces a sequence it has not applied', async () => {
    const { source, bus, feed } = setup();
    await feed.start();
    let applied!: () => void;
    const done = new Promise<void>((r) => (applied = r));
    feed.subscribe((e) => {
      if (e.seq === 1) applied();
    });
    source.commit('disabled');
    await bus.notify(1);
    await done;
    feed.close();
  });

  it('loses its lease when it cannot confirm it is current, counted from when the request was sent', async () => {
    const { source, clock, feed } = setup(2000);
    await feed.start();
    expect(feed.isCurrent()).toBe(true);
    clock.advance(2001);
    expect(feed.isCurrent()).toBe(false);
    // An answer that took longer than the lease does not bring it back.
    source.onRequest = () => clock.advance(2500);
    await feed.sync();
    expect(feed.isCurrent()).toBe(false);
    source.onRequest = () => {};
    await feed.sync();
    expect(feed.isCurrent()).toBe(true);
    source.down = true;
    clock.advance(1999);
    await feed.sync();
    expect(feed.isCurrent()).toBe(true);
    clock.advance(2);
    expect(feed.isCurrent()).toBe(false);
    feed.close();
  });

  it('counts a lease loss when the lease runs out, once, and not while its handlers apply a change it knows of', async () => {
    const source = new FakeSource();
    const clock = new ManualClock(1_000_000);
    // Polls every 5 ms (real time), so polls land while a handler below is running.
    const feed = new TenantFeed('test', { source, leaseMs: 2000, pollIntervalMs: 5, clock, logger });
    const registry = new Registry();
    feed.addMetrics(registry, 't');
    const losses = async () => Number(/^t_tenant_feed_lease_losses_total (\d+)/m.exec(await registry.metrics())?.[1]);
    await feed.start();
    let notCurrentInHandler = false;
    feed.subscribe(async () => {
      notCurrentInHandler = !feed.isCurrent();
      await new Promise((r) => setTimeout(r, 40));
    });
    source.commit('disabled');
    await feed.sync();
    expect(notCurrentInHandler).toBe(true);
    expect(feed.isCurrent()).toBe(true);
    expect(await losses()).toBe(0);
    // The registry stops answering: the lease runs out, counted once however many polls follow.
    source.down = true;
    clock.advance(2001);
    await feed.sync();
    await feed.sync();
    expect(feed.isCurrent()).toBe(false);
    expect(await losses()).toBe(1);
    // An answer that comes after its lease already ran out never held one: no loss.
    source.down = false;
    source.onRequest = () => clock.advance(2500);
    await feed.sync();
    expect(feed.isCurrent()).toBe(false);
    expect(await losses()).toBe(1);
    source.onRequest = () => {};
    // Held again, then lost again: a second loss.
    await feed.sync();
    expect(feed.isCurrent()).toBe(true);
    source.down = true;
    clock.advance(2001);
    await feed.sync();
    expect(await losses()).toBe(2);
    feed.close();
  });

  it('counts no loss for a lease it never held: its first leasing answer came after the lease had run out', async () => {
    const { source, clock, feed } = setup(2000);
    const registry = new Registry();
    feed.addMetrics(registry, 't');
    source.onRequest = () => clock.advance(2500);
    await feed.start();
    await feed.sync();
    expect(feed.isCurrent()).toBe(false);
    expect(/^t_tenant_feed_lease_losses_total (\d+)/m.exec(await registry.metrics())?.[1]).toBe('0');
    feed.close();
  });

  it('does not count a change whose handler failed: it is retried and the feed is not current meanwhile', async () => {
    const { source, feed } = setup();
    await feed.start();
    let fail = true;
    const applied: number[] = [];
    feed.subscribe((e) => {
      if (fail) throw new Error('broken consumer');
      applied.push(e.seq);
    });
    source.commit('disabled');
    await feed.sync();
    expect(feed.appliedSeq()).toBe(0);
    expect(feed.isCurrent()).toBe(false);
    fail = false;
    await feed.sync();
    expect(applied).toEqual([1]);
    expect(feed.isCurrent()).toBe(true);
    feed.close();
  });

  it('on a reset drops everything (reset handlers) and starts again from the latest sequence', async () => {
    const { source, feed } = setup();
    await feed.start();
    let resets = 0;
    feed.onReset(() => void resets++);
    source.commit('created');
    source.commit('disabled');
    source.reset = true;
    await feed.sync();
    expect(resets).toBe(1);
    expect(feed.baseSeq()).toBe(2);
    expect(feed.appliedSeq()).toBe(2);
    expect(feed.isCurrent()).toBe(true);
    feed.close();
  });

  it('knows, per tenant, the position a verdict must reflect: set before the handlers run, raised for every tenant by a reset', async () => {
    const { source, feed } = setup();
    await feed.start();
    const other = '0b6f3c2e-1a2b-4c3d-8e9f-112233445566';
    expect([feed.requiredSeq(T), feed.requiredSeq(other)]).toEqual([0, 0]);
    const duringHandler: number[] = [];
    feed.subscribe(() => void duringHandler.push(feed.requiredSeq(T)));
    source.commit('disabled');
    await feed.sync();
    expect(duringHandler).toEqual([1]);
    expect([feed.requiredSeq(T), feed.requiredSeq(other)]).toEqual([1, 0]);
    source.commit('enabled');
    source.commit('rotated');
    source.reset = true;
    await feed.sync();
    expect([feed.requiredSeq(T), feed.requiredSeq(other)]).toEqual([3, 3]);
  });

  it('whenApplied pulls at once and resolves when the position is applied, or false after its timeout', async () => {
    const { source, feed } = setup();
    await feed.start();
    expect(await feed.whenApplied(0, 10)).toBe(true);
    source.commit('disabled');
    const pulls = source.requests.length;
    expect(await feed.whenApplied(1, 1000)).toBe(true);
    expect(source.requests.length).toBeGreaterThan(pulls);
    expect(await feed.whenApplied(5, 20)).toBe(false);
    feed.close();
    expect(await feed.whenApplied(9, 1000)).toBe(false);
  });
});
