import type { Registry } from 'prom-client';
import type { TenantEvent } from './tenant-event';
import { FeedListeners } from './feed-listeners';
import type { TenantFeedHandle } from './tenant-feed';
import { TenantPositions } from './tenant-positions';

/**
 * A tenant feed driven by hand, for tests of a consumer on its own: `push`
 * applies a change the way TenantFeed does (every handler, awaited), and
 * `setCurrent` stands for the lease being held or lost.
 */
export class ManualTenantFeed extends FeedListeners implements TenantFeedHandle {
  private current = true;
  private seq = 0;
  private base = 0;
  private readonly positions = new TenantPositions();

  isCurrent(): boolean {
    return this.current;
  }

  baseSeq(): number {
    return this.base;
  }

  appliedSeq(): number {
    return this.seq;
  }

  requiredSeq(tenantId: string): number {
    return this.positions.required(tenantId);
  }

  /** Nothing to pull: a position not applied yet stays so until push() reaches it. */
  whenApplied(seq: number): Promise<boolean> {
    return Promise.resolve(this.seq >= seq);
  }

  setCurrent(current: boolean): void {
    this.current = current;
  }

  /** Applies a change (its seq is assigned when absent); rejects if a handler did. */
  async push(change: Omit<TenantEvent, 'seq'> & { seq?: number }): Promise<void> {
    this.seq = change.seq ?? this.seq + 1;
    const event: TenantEvent = { ...change, seq: this.seq };
    this.positions.applied(event.tenant_id, event.seq);
    await Promise.all([...this.handlers].map(async (h) => h(event)));
  }

  /** The feed lost its place: handlers drop everything; knowledge starts again at `base`. */
  async reset(base = this.seq): Promise<void> {
    this.base = base;
    this.positions.reset(base);
    await Promise.all([...this.resetHandlers].map(async (h) => h()));
  }

  async start(): Promise<void> {}
  close(): void {
    this.handlers.clear();
    this.resetHandlers.clear();
  }
  addMetrics(_registry: Registry, _prefix: string): void {}
}
