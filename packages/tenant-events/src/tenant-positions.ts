import { LRUCache } from 'lru-cache';

/** Tenants whose last change position is kept one by one; older ones share one floor. */
const MAX_TENANTS = 100_000;

/**
 * The feed position each tenant's state must be judged at, for one consumer
 * (docs/ARCHITECTURE.md "Verdict freshness"): the sequence of the last change
 * of that tenant this consumer applied. A verdict reflecting an earlier
 * position was judged before a change this consumer has already acted on, so
 * it is neither cached nor admitted (Zanzibar's zookies).
 *
 * Bounded: a tenant evicted from the LRU leaves its sequence in a floor that
 * every tenant not listed inherits, so eviction can only ask for more, never
 * for less. A feed reset raises that floor to the new base: the consumer
 * cannot tell which tenants changed in what it missed.
 */
export class TenantPositions {
  private floor = 0;
  private readonly seqs = new LRUCache<string, number>({
    max: MAX_TENANTS,
    dispose: (seq, _tenant, reason) => {
      if (reason === 'evict' && seq > this.floor) this.floor = seq;
    },
  });

  /** Called before the change's handlers run, so nothing judged before it can be admitted after. */
  applied(tenantId: string, seq: number): void {
    if (seq > (this.seqs.peek(tenantId) ?? 0)) this.seqs.set(tenantId, seq);
  }

  reset(base: number): void {
    this.seqs.clear();
    if (base > this.floor) this.floor = base;
  }

  required(tenantId: string): number {
    const seq = this.seqs.peek(tenantId);
    return seq === undefined || seq < this.floor ? this.floor : seq;
  }
}
