import type { PublishResult, TenantEvent, TenantEventBus, TenantEventHandler } from '@service-relay/tenant-events';

/** A bus tests drive by hand: connectivity, resets and event delivery. */
export class FakeBus implements TenantEventBus {
  connected = true;
  private readonly handlers = new Set<TenantEventHandler>();
  private readonly resets = new Set<() => void | Promise<void>>();
  private nextId = 1;

  async publish(e: Omit<TenantEvent, 'event_id'>): Promise<PublishResult> {
    const event = { ...e, event_id: String(this.nextId++) };
    await Promise.all([...this.handlers].map(async (h) => h(event)));
    return { delivered: 1, acknowledged: 1 };
  }

  subscribe(handler: TenantEventHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  onReset(handler: () => void | Promise<void>): () => void {
    this.resets.add(handler);
    return () => this.resets.delete(handler);
  }

  async reset(): Promise<void> {
    this.connected = true;
    await Promise.all([...this.resets].map(async (h) => h()));
  }

  isConnected(): boolean {
    return this.connected;
  }

  async ready(): Promise<boolean> {
    return this.connected;
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}
