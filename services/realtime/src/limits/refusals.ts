/** A refusal by a limit: the tenant and the limit's name (`tenant_connections`, `tenant_publish_rate`, `publish_rate`, `subscriptions`, `presence_members`, `payload_size`, ...). */
export type RefusalListener = (tenantId: string, limit: string) => void;

/**
 * Counts refusals per tenant for whoever listens (usage metering, #30 item
 * 3): one call per refusal, synchronous, after the refusal is decided. A
 * listener that throws is ignored. No per-tenant state is kept here.
 */
export class TenantRefusals {
  private readonly listeners = new Set<RefusalListener>();

  constructor(private readonly metric?: (limit: string) => void) {}

  /** Listens to every later refusal; the function stops it. */
  on(listener: RefusalListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  refused(tenantId: string, limit: string): void {
    this.metric?.(limit);
    for (const listener of this.listeners) {
      try {
        listener(tenantId, limit);
      } catch {
        // A metering fault must not change the refusal.
      }
    }
  }
}
