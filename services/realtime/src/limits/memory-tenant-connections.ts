import type { Admission, TenantConnections, TenantSlot } from './tenant-connections';

/**
 * One per open connection, so a plain object with three fields rather than a
 * closure over them (a closure and its context cost about twice as much heap).
 */
class Slot implements TenantSlot {
  private released = false;

  constructor(
    private readonly owner: MemoryTenantConnections,
    private readonly tenantId: string,
    private readonly onRelease: ((tenantId: string) => void) | undefined,
  ) {}

  release(): void {
    if (this.released) return;
    this.released = true;
    this.owner.untake(this.tenantId);
    this.onRelease?.(this.tenantId);
  }
}

/**
 * Counts in this process: the driver without REDIS_URL (every service in one
 * process, so this count is the whole count), and the Redis driver's local
 * bookkeeping.
 */
export class MemoryTenantConnections implements TenantConnections {
  private readonly counts = new Map<string, number>();

  constructor(readonly limit: number) {}

  /** Slots this process holds for a tenant. */
  /** Nothing to forget: counts here are the connections themselves, given back as they close. */
  async forget(_tenantId: string): Promise<void> {}

  held(tenantId: string): number {
    return this.counts.get(tenantId) ?? 0;
  }

  /** Every tenant with a slot here, with its count. */
  entries(): IterableIterator<[string, number]> {
    return this.counts.entries();
  }

  acquire(tenantId: string, limit: number = this.limit): Promise<Admission> {
    return Promise.resolve(this.acquireNow(tenantId, limit));
  }

  acquireNow(tenantId: string, limit: number = this.limit): Admission {
    if (this.held(tenantId) >= limit) return { ok: false, limit };
    return { ok: true, slot: this.take(tenantId) };
  }

  /** Takes a slot without checking the limit (the caller decided). */
  take(tenantId: string, onRelease?: (tenantId: string) => void): TenantSlot {
    this.counts.set(tenantId, this.held(tenantId) + 1);
    return new Slot(this, tenantId, onRelease);
  }

  /** Gives back one slot taken with take() (a refused reservation). */
  untake(tenantId: string): void {
    const n = this.held(tenantId) - 1;
    if (n <= 0) this.counts.delete(tenantId);
    else this.counts.set(tenantId, n);
  }

  close(): Promise<void> {
    this.counts.clear();
    return Promise.resolve();
  }
}
