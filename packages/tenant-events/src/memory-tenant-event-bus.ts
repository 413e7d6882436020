import type { NoticeHandler, TenantEventBus } from './tenant-event-bus';

/** In-process bus: valid when every service runs in this one process. */
export class MemoryTenantEventBus implements TenantEventBus {
  private readonly handlers = new Set<NoticeHandler>();

  async notify(seq: number): Promise<void> {
    for (const h of [...this.handlers]) queueMicrotask(() => h(seq));
  }

  onNotice(handler: NoticeHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
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
