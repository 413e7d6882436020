/** A slot for one connection of a tenant; release() is idempotent. */
export interface TenantSlot {
  release(): void;
}

export type Admission = { ok: true; slot: TenantSlot } | { ok: false; limit: number };

/**
 * Open WebSocket connections per tenant, counted across every realtime
 * instance (MAX_CONNECTIONS_PER_TENANT). Drivers: memory-tenant-connections.ts
 * (one process), redis-tenant-connections.ts (shared); factory:
 * create-tenant-connections.ts; behaviour: tenant-connections.contract.ts.
 */
export interface TenantConnections {
  readonly limit: number;
  /** Takes a slot, or refuses when the tenant already holds `limit` connections (default: the process-wide one; #30: the tenant's). */
  acquire(tenantId: string, limit?: number): Promise<Admission>;
  /**
   * The tenant was deleted (#30): this instance keeps no count of it any
   * more (no spare slots, no heartbeat) and its shared record is removed.
   * Connections still closing give their slots back as usual.
   */
  forget(tenantId: string): Promise<void>;
  /** Gives back every slot this instance holds (a clean stop) and stops its timers. */
  close(): Promise<void>;
}

/** What a refused client is told to wait, at least, before it tries again (slots free as other clients leave). */
export const TENANT_LIMIT_RETRY_AFTER_MS = 5000;
