import { randomUUID } from 'node:crypto';
import { createLogger, ManualClock, RelayError } from '@service-relay/core';
import { beforeEach, describe, expect, it } from 'vitest';
import { ManualTenantFeed } from '@service-relay/tenant-events';
import type { TenantKeys, TenantKeysData } from '../token/tenant-keys';
import { CachingKeySource, type CachingKeySourceOptions } from './caching-key-source';
import type { KeyFetcher } from './key-fetcher';
import { MemoryKeyCache } from './memory-key-cache';
import type { SharedKeyCache } from './shared-key-cache';

const logger = createLogger({ service: 'test', level: 'silent' });
const TTL_MS = 60_000;

/** The registry, by hand: answers from a map, or holds answers until released. */
class FakeFetcher implements KeyFetcher {
  readonly data = new Map<string, TenantKeysData>();
  calls = 0;
  down = false;
  held: { tenantId: string; answer: TenantKeysData | undefined; release: () => void }[] = [];
  hold = false;

  async fetch(tenantId: string): Promise<TenantKeysData> {
    this.calls++;
    if (this.down) throw new RelayError('unavailable', 'registry down');
    const answer = this.data.get(tenantId) ?? { found: false, disabled: false, version: 0 };
    if (this.hold) await new Promise<void>((release) => this.held.push({ tenantId, answer, release }));
    return answer;
  }
  async ready() {
    return !this.down;
  }
  close() {}
}

const secretOf = (v: number) => `secret-${v}-${'s'.repeat(36)}`;
const tenantData = (version: number, extra: Partial<TenantKeysData> = {}): TenantKeysData => ({
  found: true,
  disabled: false,
  version,
  asOfSeq: 0,
  primary: { secret: secretOf(version), keyVersion: version },
  ...extra,
});
const versionOf = (k: TenantKeys) => k.version;

/** A shared cache whose backing store is down. */
const brokenShared: SharedKeyCache = {
  get: () => Promise.reject(new Error('ECONNREFUSED')),
  put: () => Promise.reject(new Error('ECONNREFUSED')),
  drop: () => Promise.reject(new Error('ECONNREFUSED')),
  dropAll: () => Promise.reject(new Error('ECONNREFUSED')),
  ready: async () => false,
  close: async () => {},
};

describe('CachingKeySource', () => {
  let clock: ManualClock;
  let bus: ManualTenantFeed;
  let fetcher: FakeFetcher;
  let shared: MemoryKeyCache;
  const tenant = randomUUID();

  const make = async (o: Partial<CachingKeySourceOptions> = {}) => {
    const source = new CachingKeySource({ fetcher, shared, feed: bus, clock, logger, ttlMs: TTL_MS, ...o });
    await source.start();
    return source;
  };

  beforeEach(() => {
    clock = new ManualClock(1_700_000_000_000);
    bus = new ManualTenantFeed();
    fetcher = new FakeFetcher();
    shared = new MemoryKeyCache({ clock });
    fetcher.data.set(tenant, tenantData(1));
  });

  it('serves from the in-process cache after one fetch, and shares one fetch between concurrent misses', async () => {
    const source = await make();
    const all = await Promise.all([source.get(tenant), source.get(tenant), source.get(tenant)]);
    expect(all.map(versionOf)).toEqual([1, 1, 1]);
    expect(fetcher.calls).toBe(1);
    expect(source.peek(tenant)).toBe(all[0]);
    expect(fetcher.calls).toBe(1);
  });

  it('fills a second replica from the shared cache without the registry', async () => {
    await (await make()).get(tenant);
    const replica = await make();
    expect(versionOf(await replica.get(tenant))).toBe(1);
    expect(fetcher.calls).toBe(1);
  });

  it('drops a tenant everywhere on its event', async () => {
    const source = await make();
    await source.get(tenant);
    fetcher.data.set(tenant, tenantData(2, { disabled: true }));
    await bus.push({ tenant_id: tenant, kind: 'disabled', version: 2, revoked_key_versions: [] });
    expect(source.peek(tenant)).toBeUndefined();
    expect(await shared.get(tenant)).toBeUndefined();
    const after = await source.get(tenant);
    expect(after.found && after.disabled).toBe(true);
    expect(fetcher.calls).toBe(2);
  });

  it('never serves nor stores a fetch that started before an event and answers older state', async () => {
    const source = await make();
    fetcher.hold = true;
    const inFlight = source.get(tenant);
    await waitFor(() => fetcher.held.length === 1);
    // The registry commits version 2 and the event arrives while the old answer is on its way.
    fetcher.data.set(tenant, tenantData(2));
    await bus.push({ tenant_id: tenant, kind: 'rotated', version: 2, revoked_key_versions: [] });
    fetcher.hold = false;
    fetcher.held[0]!.release();
    expect(versionOf(await inFlight)).toBe(2);
    expect(fetcher.calls).toBe(2);
    expect(versionOf(source.peek(tenant)!)).toBe(2);
    expect((await shared.get(tenant))?.data.version).toBe(2);
  });

  it('refuses a shared-cache entry below the version floor', async () => {
    // A shared store that still hands out state older than an event this
    // replica heard (a late write from a replica that missed it).
    const staleShared: SharedKeyCache = { ...brokenShared, get: async () => ({ data: tenantData(2), ttlMs: TTL_MS }), drop: async () => {}, put: async () => {} };
    const replica = await make({ shared: staleShared });
    await bus.push({ tenant_id: tenant, kind: 'rotated', version: 3, revoked_key_versions: [] });
    fetcher.data.set(tenant, tenantData(3));
    expect(versionOf(await replica.get(tenant))).toBe(3);
    expect(fetcher.calls).toBe(1);
  });

  it('caches unknown tenants briefly in bounded space', async () => {
    const source = await make({ maxNegativeEntries: 2, negativeTtlMs: 5_000 });
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    for (const id of [a, b, a, b]) expect((await source.get(id)).found).toBe(false);
    expect(fetcher.calls).toBe(2);
    await source.get(c); // evicts a, the least recently used
    await source.get(a);
    expect(fetcher.calls).toBe(4);
    clock.advance(5_000);
    await source.get(a);
    expect(fetcher.calls).toBe(5);
    // A created event ends a negative entry at once.
    fetcher.data.set(b, tenantData(1));
    await bus.push({ tenant_id: b, kind: 'created', version: 1, revoked_key_versions: [] });
    expect((await source.get(b)).found).toBe(true);
  });

  it('keeps verifying from the in-process cache and the registry while the shared cache is down', async () => {
    const source = await make({ shared: brokenShared });
    expect(versionOf(await source.get(tenant))).toBe(1);
    expect(versionOf(await source.get(tenant))).toBe(1);
    expect(fetcher.calls).toBe(1);
    await bus.push({ tenant_id: tenant, kind: 'disabled', version: 2, revoked_key_versions: [] });
    fetcher.data.set(tenant, tenantData(2, { disabled: true }));
    const after = await source.get(tenant);
    expect(after.found && after.disabled).toBe(true);
  });

  it('trusts no cache while the feed is not current, and drops everything on reset', async () => {
    const source = await make();
    await source.get(tenant);
    bus.setCurrent(false);
    expect(source.peek(tenant)).toBeUndefined();
    fetcher.data.set(tenant, tenantData(2, { disabled: true })); // an event this replica cannot hear
    expect(versionOf(await source.get(tenant))).toBe(2);
    expect(versionOf(await source.get(tenant))).toBe(2);
    expect(fetcher.calls).toBe(3);
    bus.setCurrent(true);
    await bus.reset();
    expect(await shared.get(tenant)).toBeUndefined();
    expect(versionOf(await source.get(tenant))).toBe(2);
    expect(fetcher.calls).toBe(4);
  });

  it('serves no cached key while the feed is not current: not its own entry, not a negative entry, not the shared cache', async () => {
    const unknown = randomUUID();
    const warm = await make();
    await warm.get(tenant); // now in the shared cache too
    const source = await make();
    await source.get(tenant);
    await source.get(unknown); // a negative entry
    expect(source.peek(tenant)).toBeDefined();
    expect(source.peek(unknown)).toBeDefined();
    const before = fetcher.calls;
    bus.setCurrent(false);
    // The registry changed meanwhile in ways this replica cannot hear: every answer comes from the registry.
    fetcher.data.set(tenant, tenantData(2, { disabled: true }));
    fetcher.data.set(unknown, tenantData(1));
    expect([source.peek(tenant), source.peek(unknown)]).toEqual([undefined, undefined]);
    expect(versionOf(await source.get(tenant))).toBe(2);
    expect((await source.get(unknown)).version).toBe(1);
    const fresh = await make();
    expect(versionOf(await fresh.get(tenant))).toBe(2);
    expect(fetcher.calls).toBe(before + 3);
  });

  it('does not store a fetch that was in flight across a reset', async () => {
    const source = await make();
    fetcher.hold = true;
    const inFlight = source.get(tenant);
    await waitFor(() => fetcher.held.length === 1);
    await bus.reset();
    fetcher.hold = false;
    fetcher.held[0]!.release();
    await inFlight;
    expect(source.peek(tenant)).toBeUndefined();
  });

  it('uses a shared entry only if it reflects the feed from where this replica started (as_of_seq >= base)', async () => {
    // Another replica stored state read at sequence 3; this replica's feed starts at 5,
    // so changes 4-5 (which it never saw) may have revoked what the entry says.
    fetcher.data.set(tenant, { ...tenantData(1), asOfSeq: 3 });
    const writer = await make();
    await writer.get(tenant);
    expect((await shared.get(tenant))?.data.asOfSeq).toBe(3);
    fetcher.data.set(tenant, { ...tenantData(1, { disabled: true }), asOfSeq: 5 });
    const startedAt = async (base: number) => {
      const feed = new ManualTenantFeed();
      await feed.reset(base);
      return make({ feed });
    };
    // A replica that started at 3 saw everything after the entry: it may use it.
    const early = await (await startedAt(3)).get(tenant);
    expect(early.found && early.disabled).toBe(false);
    // One that started at 5 may not: it asks the registry.
    const late = await (await startedAt(5)).get(tenant);
    expect(late.found && late.disabled).toBe(true);
  });

  it('fails closed when registry fetches overflow their bound', async () => {
    const source = await make({ maxConcurrentFetches: 1, maxQueuedFetches: 1 });
    fetcher.hold = true;
    const first = source.get(randomUUID());
    const second = source.get(randomUUID());
    await expect(source.get(randomUUID())).rejects.toMatchObject({ code: 'unavailable' });
    await waitFor(() => fetcher.held.length === 1);
    fetcher.held[0]!.release();
    await waitFor(() => fetcher.held.length === 2);
    fetcher.held[1]!.release();
    expect((await first).found).toBe(false);
    expect((await second).found).toBe(false);
  });

  it('asked for a feed position this replica has not applied (min_seq), uses no cached layer: the registry answer must reflect it', async () => {
    const source = await make();
    await source.get(tenant);
    expect(fetcher.calls).toBe(1);
    // The manual feed stays at seq 0: it cannot catch up, so the registry is asked.
    fetcher.data.set(tenant, tenantData(1, { asOfSeq: 2 }));
    await expect(source.get(tenant, 3)).rejects.toMatchObject({ code: 'unavailable' });
    expect(fetcher.calls).toBe(2);
    fetcher.data.set(tenant, tenantData(2, { asOfSeq: 3 }));
    expect(versionOf(await source.get(tenant, 3))).toBe(2);
    expect((await source.get(tenant, 3)).asOfSeq).toBe(3);
    // A position already applied here (a change of another tenant) is served from the caches as before.
    await bus.push({ seq: 3, tenant_id: randomUUID(), kind: 'created', version: 1, revoked_key_versions: [] });
    const calls = fetcher.calls;
    await source.get(tenant, 3);
    await source.get(tenant, 3);
    expect(fetcher.calls).toBe(calls);
    expect(source.appliedSeq()).toBe(3);
  });

  it('past its TTL, serves the last keys held while the registry cannot answer and the feed is current (stale-if-error); never after a change of the tenant or without the lease', async () => {
    const source = await make({ shared: undefined });
    await source.get(tenant);
    clock.advance(TTL_MS + 1);
    fetcher.down = true;
    expect(versionOf(await source.get(tenant))).toBe(1);
    bus.setCurrent(false);
    await expect(source.get(tenant)).rejects.toMatchObject({ code: 'unavailable' });
    bus.setCurrent(true);
    await bus.push({ tenant_id: tenant, kind: 'disabled', version: 2, revoked_key_versions: [] });
    await expect(source.get(tenant)).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('keeps the last keys for stale-if-error when the shared cache hands out an entry at the end of its TTL (seen: every check refused for the rest of a PostgreSQL outage)', async () => {
    // The shared entry expires as it is read: Redis answered it with PTTL 0.
    let sharedEntry: { data: TenantKeysData; ttlMs: number } | undefined = { data: tenantData(1), ttlMs: 0 };
    const expiring: SharedKeyCache = { ...brokenShared, get: async () => sharedEntry, put: async () => {}, drop: async () => {} };
    const source = await make({ shared: expiring });
    await source.get(tenant);
    expect(versionOf(await source.get(tenant))).toBe(1);
    // PostgreSQL goes away; the shared entry is gone too.
    sharedEntry = undefined;
    fetcher.down = true;
    clock.advance(TTL_MS + 1);
    expect(versionOf(await source.get(tenant)), 'the last keys held, while the feed is current').toBe(1);
  });
});

/** Yields to the event loop until `cond` holds (it depends only on in-process promises). */
async function waitFor(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !cond(); i++) await new Promise((r) => setImmediate(r));
  expect(cond()).toBe(true);
}
