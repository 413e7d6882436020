import type { TenantKeys } from '../token/tenant-keys';

export type KeyLayer = 'local' | 'negative' | 'shared' | 'registry' | 'stale';

/** Where the verifier gets a tenant's keys. */
export interface KeySource {
  /** A fresh in-process answer, synchronously, or undefined (then call get()). */
  peek(tenantId: string): TenantKeys | undefined;
  /**
   * The tenant's keys; rejects with RelayError('unavailable') when nothing
   * fresh can be had. With `minSeq`, keys reflecting at least that tenant-feed
   * position (the feed is given a moment to get there, else the registry is asked).
   */
  get(tenantId: string, minSeq?: number): Promise<TenantKeys>;
  /** The tenant-feed position every cached answer reflects (the feed's applied sequence). */
  appliedSeq(): number;
  /** Dependency checks for /readyz. */
  readiness(): Promise<Record<string, boolean>>;
  start(): Promise<void>;
  close(): Promise<void>;
}

/** What the key source reports to metrics. */
export interface KeySourceObserver {
  hit(layer: KeyLayer): void;
  fault(layer: 'shared' | 'registry'): void;
}

export const nullObserver: KeySourceObserver = { hit: () => {}, fault: () => {} };
