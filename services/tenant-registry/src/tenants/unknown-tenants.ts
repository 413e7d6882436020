import { clockedLru, setUntil, systemClock, type Clock } from '@service-relay/core';

/** Ids remembered at once; past it the least recently asked is forgotten (it is looked up again, nothing worse). */
export const UNKNOWN_TENANTS_MAX = 10_000;
/** How long "no such tenant" is believed without asking the database again. */
export const UNKNOWN_TENANT_TTL_MS = 5000;

/**
 * The negative cache: tenant ids the database just said do not exist, so a
 * flood of tokens or host-sync calls naming made-up tenants costs one lookup
 * per id per TTL, not one per request (issue #28 item 5).
 *
 * Why it cannot hide a tenant that is created: ids are random v4 UUIDs that
 * this registry draws (122 random bits) and nobody knows before the create
 * commits, so an id can only be remembered as unknown before its create by a
 * guess of those bits. The replica that creates a tenant also forgets its id
 * at once (`forget`), and every entry expires after UNKNOWN_TENANT_TTL_MS
 * anyway, so even that impossible case heals on its own. A lookup that began
 * before a create and ended after it cannot happen for the same reason: the
 * id it would ask about did not exist anywhere yet.
 */
export class UnknownTenants {
  private readonly ids: ReturnType<typeof clockedLru<string, true>>;

  constructor(
    private readonly clock: Clock = systemClock,
    max = UNKNOWN_TENANTS_MAX,
    private readonly ttlMs = UNKNOWN_TENANT_TTL_MS,
  ) {
    this.ids = clockedLru<string, true>(max, clock);
  }

  has(tenantId: string): boolean {
    return this.ids.get(tenantId) === true;
  }

  /** The database said there is no such tenant. */
  add(tenantId: string): void {
    setUntil(this.ids, tenantId, true, this.clock.now() + this.ttlMs);
  }

  /** The tenant now exists (created here). */
  forget(tenantId: string): void {
    this.ids.delete(tenantId);
  }

  get size(): number {
    return this.ids.size;
  }
}
