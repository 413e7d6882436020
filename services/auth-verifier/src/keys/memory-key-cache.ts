import { clockedLru, setUntil, type Clock } from '@service-relay/core';
import type { LRUCache } from 'lru-cache';
import type { TenantKeysData } from '../token/tenant-keys';
import type { SharedKeyCache, SharedKeyEntry } from './shared-key-cache';

export interface MemoryKeyCacheOptions {
  clock: Clock;
  /** Tenants held at once; past it the least recently used go first. */
  maxEntries?: number;
  /** Raised floors held at once, evicted oldest-raised first (the Redis driver lets them expire instead). */
  maxFloors?: number;
}

interface Held {
  data: TenantKeysData;
  expiresAt: number;
}

/**
 * The shared-cache contract in one process: what the Redis driver does across
 * replicas, for tests of the key source. Bounded, like every cache here.
 */
export class MemoryKeyCache implements SharedKeyCache {
  private readonly entries: LRUCache<string, Held>;
  /** Read with peek, so reads do not reorder. */
  private readonly floors: LRUCache<string, number>;

  constructor(private readonly opts: MemoryKeyCacheOptions) {
    this.entries = clockedLru(opts.maxEntries ?? 10_000, opts.clock);
    this.floors = clockedLru(opts.maxFloors ?? 100_000, opts.clock);
  }

  async get(tenantId: string): Promise<SharedKeyEntry | undefined> {
    const e = this.entries.get(tenantId);
    if (!e || e.data.version < this.floor(tenantId)) return undefined;
    return { data: e.data, ttlMs: e.expiresAt - this.opts.clock.now() };
  }

  async put(tenantId: string, data: TenantKeysData, ttlMs: number): Promise<void> {
    if (data.version < this.floor(tenantId)) return;
    const current = this.entries.peek(tenantId);
    if (current && current.data.version > data.version) return;
    const expiresAt = this.opts.clock.now() + ttlMs;
    setUntil(this.entries, tenantId, { data, expiresAt }, expiresAt);
  }

  async drop(tenantId: string, version: number): Promise<void> {
    this.entries.delete(tenantId);
    if (version > this.floor(tenantId)) this.floors.set(tenantId, version);
  }

  async dropAll(): Promise<void> {
    this.entries.clear();
  }

  async ready(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    this.entries.clear();
  }

  private floor(tenantId: string): number {
    return this.floors.peek(tenantId) ?? 0;
  }
}
