import type { Clock } from '@service-relay/core';
import type { VerifiedIdentity } from '@service-relay/verifier-client';

interface Entry {
  identity: VerifiedIdentity;
  /** ms since the epoch after which the entry is not served. */
  until: number;
}

export interface VerificationCacheOptions {
  ttlMs: number;
  maxEntries: number;
  clock: Clock;
}

/**
 * Positive verification results keyed by the token's hash (the token itself is
 * never stored). Bounded LRU: a Map's insertion order is its recency order.
 * A per-tenant index lets a tenant event drop that tenant's entries at once.
 *
 * `generation` increases on every drop. A caller that started a verifier call
 * before a drop must not store its (possibly stale) answer afterwards: set()
 * refuses results whose generation is out of date.
 */
export class VerificationCache {
  private readonly entries = new Map<string, Entry>();
  private readonly byTenant = new Map<string, Set<string>>();
  private gen = 0;

  constructor(private readonly opts: VerificationCacheOptions) {}

  get enabled(): boolean {
    return this.opts.ttlMs > 0 && this.opts.maxEntries > 0;
  }

  get size(): number {
    return this.entries.size;
  }

  get generation(): number {
    return this.gen;
  }

  get(key: string): VerifiedIdentity | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.until <= this.opts.clock.now()) {
      this.delete(key, e.identity.tenantId);
      return undefined;
    }
    // Refresh recency.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.identity;
  }

  /** Stores a result obtained while `generation` was current; false when it was not stored. */
  set(key: string, identity: VerifiedIdentity, generation: number): boolean {
    if (!this.enabled || generation !== this.gen) return false;
    const now = this.opts.clock.now();
    // Never past the token's own expiry.
    const until = Math.min(now + this.opts.ttlMs, identity.expiresAt * 1000);
    if (until <= now) return false;
    const old = this.entries.get(key);
    if (old) this.delete(key, old.identity.tenantId);
    this.entries.set(key, { identity, until });
    let keys = this.byTenant.get(identity.tenantId);
    if (!keys) this.byTenant.set(identity.tenantId, (keys = new Set()));
    keys.add(key);
    while (this.entries.size > this.opts.maxEntries) {
      const [oldestKey, oldest] = this.entries.entries().next().value!;
      this.delete(oldestKey, oldest.identity.tenantId);
    }
    return true;
  }

  dropTenant(tenantId: string): void {
    this.gen += 1;
    const keys = this.byTenant.get(tenantId);
    if (!keys) return;
    this.byTenant.delete(tenantId);
    for (const k of keys) this.entries.delete(k);
  }

  clear(): void {
    this.gen += 1;
    this.entries.clear();
    this.byTenant.clear();
  }

  private delete(key: string, tenantId: string): void {
    this.entries.delete(key);
    const keys = this.byTenant.get(tenantId);
    if (!keys) return;
    keys.delete(key);
    if (keys.size === 0) this.byTenant.delete(tenantId);
  }
}
