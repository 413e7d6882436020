import { randomUUID } from 'node:crypto';
import type { Logger } from '@service-relay/core';
import type { TenantEvent } from './tenant-event';
import type { PublishResult, TenantEventBus, TenantEventHandler } from './tenant-event-bus';

/** In-process bus: valid when every service runs in this one process. */
export class MemoryTenantEventBus implements TenantEventBus {
  private readonly handlers = new Set<TenantEventHandler>();

  constructor(private readonly logger?: Logger) {}

  async publish(e: Omit<TenantEvent, 'event_id'>): Promise<PublishResult> {
    const event: TenantEvent = { ...e, event_id: randomUUID() };
    const handlers = [...this.handlers];
    let acknowledged = 0;
    // Each handler is one consumer here; a failing consumer does not stop the others.
    await Promise.all(
      handlers.map(async (h) => {
        try {
          await h(event);
          acknowledged += 1;
        } catch (err) {
          this.logger?.error({ err, tenant_id: event.tenant_id, kind: event.kind }, 'tenant event handler failed');
        }
      }),
    );
    return { delivered: handlers.length, acknowledged };
  }

  subscribe(handler: TenantEventHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  onReset(): () => void {
    return () => {};
  }

  isConnected(): boolean {
    return true;
  }

  async ready(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    this.handlers.clear();
  }
}
