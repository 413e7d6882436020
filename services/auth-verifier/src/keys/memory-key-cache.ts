import type { Clock } from '@service-relay/core';
import type { TenantKeysData } from '../token/tenant-keys';
import type { SharedKeyCache, SharedKeyEntry } from './shared-key-cache';

/**
 * The shared-cache contract in one process: what the Redis driver does across
 * replicas, for tests of the key source and for the one-process default.
 */
export class MemoryKeyCache implements SharedKeyCache {
  private readonly entries = new Map<string, { data: TenantKeysData; expiresAt: number }>();
  private readonly floors = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  async get(tenantId: string): Promise<SharedKeyEntry | undefined> {
    const e = this.entries.get(tenantId);
    const now = this.clock.now();
    if (!e || e.expiresAt <= now || e.data.version < (this.floors.get(tenantId) ?? 0)) return undefined;
    return { data: e.data, ttlMs: e.expiresAt - now };
  }

  async put(tenantId: string, data: TenantKeysData, ttlMs: number): Promise<void> {
    if (data.version < (this.floors.get(tenantId) ?? 0)) return;
    const current = this.entries.get(tenantId);
    if (current && current.expiresAt > this.clock.now() && current.data.version > data.version) return;
    this.entries.set(tenantId, { data, expiresAt: this.clock.now() + ttlMs });
  }

  async drop(tenantId: string, version: number): Promise<void> {
    this.entries.delete(tenantId);
    this.floors.set(tenantId, Math.max(version, this.floors.get(tenantId) ?? 0));
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
}
