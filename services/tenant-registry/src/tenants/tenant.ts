import type { TenantEventKind } from '@service-relay/tenant-events';
import type { TenantLabels } from './tenant-meta';

/** A tenant's state, without any secret. */
export interface Tenant {
  tenantId: string;
  hostSyncClientId: string;
  disabled: boolean;
  /** State version: +1 on every change that affects tokens. */
  version: number;
  primaryKeyVersion: number;
  previousKeyVersion: number | null;
  /** A replaced host-sync secret still accepted (rotated with keep_previous, #33). */
  hasPreviousHostSync: boolean;
  createdAt: Date;
  updatedAt: Date;
  /** Display name (null: none) and labels (#30). */
  name: string | null;
  labels: TenantLabels;
}

/** The admin API's tenant view (CONTRACT.md, plus name and labels): never a JWT secret. */
export interface TenantView {
  tenant_id: string;
  host_sync_client_id: string;
  disabled: boolean;
  has_previous_secret: boolean;
  /** A replaced host-sync secret is still accepted (rotated with keep_previous) until host_sync/expire_previous. */
  has_previous_host_sync: boolean;
  created_at: string;
  updated_at: string;
  name: string | null;
  labels: TenantLabels;
}

export function toTenantView(t: Tenant): TenantView {
  return {
    tenant_id: t.tenantId,
    host_sync_client_id: t.hostSyncClientId,
    disabled: t.disabled,
    has_previous_secret: t.previousKeyVersion !== null,
    has_previous_host_sync: t.hasPreviousHostSync,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
    name: t.name,
    labels: t.labels,
  };
}

/** What a committed change means to consumers of tenant events. */
export interface TenantChangeEvent {
  kind: TenantEventKind;
  version: number;
  revokedKeyVersions: number[];
  /** Carried by channel_rules, user_revoked and user_disconnected (TenantEvent.detail). */
  detail?: Readonly<Record<string, unknown>>;
}

/** A change as committed: with its place in the tenant feed. */
export interface CommittedChangeEvent extends TenantChangeEvent {
  seq: number;
}

/** The outcome of an admin mutation. */
export interface TenantChange {
  tenant: Tenant;
  /** Absent when nothing token-relevant changed (no-op, host-sync rotation). */
  event?: CommittedChangeEvent;
  /** The new host-sync client secret, in plaintext, for the one response that shows it. */
  hostSyncSecret?: string;
}

export interface SigningKey {
  secret: string;
  keyVersion: number;
}

/** Key material for verifiers (decrypted). */
export interface TenantKeys {
  /** The tenant feed sequence these keys reflect. */
  asOfSeq: number;
  tenantId: string;
  disabled: boolean;
  version: number;
  primary: SigningKey;
  previous: SigningKey | null;
  /** User-level revocations (lowercase user id, unix seconds), read in the same snapshot. */
  userRevocations: ReadonlyArray<{ userId: string; before: number }>;
}

/** What the host-sync check reads, with the primary opened only on demand. */
export interface HostSyncCredential {
  hostSyncClientId: string;
  secretHash: string;
  /** The replaced secret's hash during an overlap, else null. */
  previousSecretHash: string | null;
  disabled: boolean;
  tenantId: string;
  /** The primary secret's key version: it changes exactly when the primary does. */
  primaryKeyVersion: number;
  openPrimarySecret(): string;
}

export interface TenantPage {
  tenants: Tenant[];
  /** Position after the last tenant, or null on the last page. */
  next: ListPosition | null;
}

export interface ListPosition {
  createdAt: Date;
  tenantId: string;
}
