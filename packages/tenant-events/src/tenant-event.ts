import { isCanonicalUuid } from '@service-relay/core';

export const TENANT_EVENT_KINDS = ['created', 'disabled', 'enabled', 'rotated', 'previous_expired', 'revoked_all'] as const;
export type TenantEventKind = (typeof TENANT_EVENT_KINDS)[number];

/**
 * A change of a tenant's token-relevant state. `version` is the tenant's state
 * version after the change: it increases by one per change, so a consumer that
 * sees a jump knows it missed an event. `revoked_key_versions` lists the
 * secrets that stopped verifying with this change.
 */
export interface TenantEvent {
  event_id: string;
  tenant_id: string;
  kind: TenantEventKind;
  version: number;
  revoked_key_versions: number[];
}

export function parseTenantEvent(text: string): TenantEvent | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const e = v as Record<string, unknown>;
  if (typeof e.event_id !== 'string' || !isCanonicalUuid(e.tenant_id)) return undefined;
  if (!TENANT_EVENT_KINDS.includes(e.kind as TenantEventKind)) return undefined;
  if (!Number.isSafeInteger(e.version)) return undefined;
  const revoked = Array.isArray(e.revoked_key_versions) ? e.revoked_key_versions.filter(Number.isSafeInteger) : [];
  return { event_id: e.event_id, tenant_id: e.tenant_id, kind: e.kind as TenantEventKind, version: e.version as number, revoked_key_versions: revoked as number[] };
}

/** Tracks the last version seen per tenant (bounded) and reports gaps. */
export class VersionTracker {
  private readonly seen = new Map<string, number>();
  constructor(private readonly max = 100_000) {}

  /** Records the event; true when versions were skipped since the last one seen. */
  observe(event: TenantEvent): boolean {
    const last = this.seen.get(event.tenant_id);
    this.seen.delete(event.tenant_id);
    this.seen.set(event.tenant_id, Math.max(last ?? 0, event.version));
    if (this.seen.size > this.max) this.seen.delete(this.seen.keys().next().value!);
    return last !== undefined && event.version > last + 1;
  }

  clear(): void {
    this.seen.clear();
  }
}
