import type { TenantKeysData } from '../token/tenant-keys';

export interface SharedKeyEntry {
  data: TenantKeysData;
  /** How much longer the entry may be served, so replicas share one horizon. */
  ttlMs: number;
}

/**
 * The cache shared by every verifier replica. createSharedKeyCache() picks
 * the driver (Redis; none in one process); the in-memory driver serves tests;
 * both pass shared-key-cache.contract.ts. Each tenant has a version floor: an
 * entry below it is never written or returned, so a fetch that started before
 * a tenant event cannot put older state back.
 * Every method may reject when the backing store is down; callers treat that
 * as a miss.
 */
export interface SharedKeyCache {
  /** Connects; a store that cannot be reached yet is only a miss, so callers need not wait forever. */
  start?(): Promise<void>;
  get(tenantId: string): Promise<SharedKeyEntry | undefined>;
  /** Stores unless data.version is below the tenant's floor or the stored entry. */
  put(tenantId: string, data: TenantKeysData, ttlMs: number): Promise<void>;
  /** Removes the tenant's entry and raises its floor to `version`. */
  drop(tenantId: string, version: number): Promise<void>;
  /** Forgets every entry (after a bus reset: nothing stored can be proven fresh). */
  dropAll(): Promise<void>;
  ready(): Promise<boolean>;
  close(): Promise<void>;
}
