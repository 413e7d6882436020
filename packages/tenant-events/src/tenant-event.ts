export const TENANT_EVENT_KINDS = [
  'created',
  'disabled',
  'enabled',
  'rotated',
  'previous_expired',
  'revoked_all',
  // Issue #13: carry a `detail` (see TenantEventDetail).
  'channel_rules',
  'user_revoked',
  'user_disconnected',
  // Issue #30: the tenant is deleted for good. Consumers treat it like
  // `disabled` (every token refused, every connection closed) and drop or
  // purge whatever they hold of the tenant; it never comes back.
  'deleted',
  // Issue #30: a tenant's limits changed (directly or through its plan).
  'limits',
  // Issue #32: a tenant's subscribe/publish callbacks changed (set, removed,
  // secret rotated). The detail carries only `callbacks_version`: the signing
  // secret never travels in the feed; realtime asks the registry again.
  'callbacks',
  // Issue #32: the webhook event types a tenant's enabled endpoints want
  // changed (an endpoint created, deleted, switched on or off). The detail
  // carries the new set: realtime records only those events for the tenant.
  'webhooks',
] as const;
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
  /**
   * What a consumer needs to apply the change without asking back, for the
   * kinds that carry one: `channel_rules` → `{ rules, rules_version }` (the
   * tenant's new channel rules document, canonical, and its per-tenant version), `user_revoked` → `{ user_id, before }` (tokens of
   * that user with `iat` absent or earlier than `before`, unix seconds, stop
   * verifying), `user_disconnected` → `{ user_id }`, `limits` → `{ limits, limits_version, plan }`
   * (the tenant's plan and override layers merged, partial: realtime fills the
   * rest from its environment; `limits_version` per tenant, only growing),
   * `callbacks` → `{ callbacks_version }` (per tenant, only growing), `webhooks` →
   * `{ webhook_events, webhooks_version }` (the event types at least one enabled
   * endpoint of the tenant wants, each once; the version per tenant, only growing). Absent otherwise.
   */
  detail?: Readonly<Record<string, unknown>>;
}

export function isTenantEventKind(v: unknown): v is TenantEventKind {
  return TENANT_EVENT_KINDS.includes(v as TenantEventKind);
}
