import type { PartialLimits } from '@service-relay/tenant-events';
import type { FetchedLimits, LimitsSource } from '../limits/tenant-limits-cache';

/** The registry's TenantLimits answer, in memory: every tenant exists with nothing set until `set`. */
export class MemoryLimitsSource implements LimitsSource {
  private readonly tenants = new Map<string, { limits: PartialLimits; version: number }>();
  /** Set: every fetch rejects (the registry cannot be reached). */
  failing = false;
  calls = 0;

  set(tenantId: string, limits: PartialLimits): { limits: PartialLimits; version: number } {
    const entry = { limits, version: (this.tenants.get(tenantId)?.version ?? 0) + 1 };
    this.tenants.set(tenantId, entry);
    return entry;
  }

  async fetch(tenantId: string): Promise<FetchedLimits | undefined> {
    this.calls++;
    if (this.failing) throw new Error('registry unreachable (test)');
    return { ...(this.tenants.get(tenantId) ?? { limits: {}, version: 0 }), asOfSeq: Number.MAX_SAFE_INTEGER };
  }

  close(): void {}
}
