import type { TenantEvent } from './tenant-event';

export type ChangeHandler = (event: TenantEvent) => void | Promise<void>;
export type ResetHandler = () => void | Promise<void>;

/** The handlers a tenant feed runs: one per change, and on a reset. */
export abstract class FeedListeners {
  protected readonly handlers = new Set<ChangeHandler>();
  protected readonly resetHandlers = new Set<ResetHandler>();

  subscribe(handler: ChangeHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  onReset(handler: ResetHandler): () => void {
    this.resetHandlers.add(handler);
    return () => this.resetHandlers.delete(handler);
  }
}
