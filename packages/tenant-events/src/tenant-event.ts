export const TENANT_EVENT_KINDS = ['created', 'disabled', 'enabled', 'rotated', 'previous_expired', 'revoked_all'] as const;
export type TenantEventKind = (typeof TENANT_EVENT_KINDS)[number];

/**
 * A committed change of a tenant's token-relevant state, as the tenant feed
 * hands it to consumers, in `seq` order. `version` is the tenant's state
 * version after the change; `revoked_key_versions` lists the secrets that
 * stopped verifying with it.
 */
export interface TenantEvent {
  /** Place in the tenant feed: global, gap-free, increasing. */
  seq: number;
  tenant_id: string;
  kind: TenantEventKind;
  version: number;
  revoked_key_versions: number[];
}

export function isTenantEventKind(v: unknown): v is TenantEventKind {
  return TENANT_EVENT_KINDS.includes(v as TenantEventKind);
}
