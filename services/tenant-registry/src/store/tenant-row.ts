import type { Tenant } from '../tenants/tenant';
import type { TenantState } from '../tenants/tenant-rules';

/** The tenants table, column for column. */
export interface TenantRow {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_secret_hash: string;
  disabled: boolean;
  version: number;
  primary_key_version: number;
  primary_secret: string;
  previous_key_version: number | null;
  previous_secret: string | null;
  created_at: Date;
  updated_at: Date;
}

export const TENANT_COLUMNS =
  'tenant_id, host_sync_client_id, host_sync_secret_hash, disabled, version, primary_key_version, primary_secret, previous_key_version, previous_secret, created_at, updated_at';

export const INSERT_TENANT = `INSERT INTO tenants (${TENANT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`;

export const UPDATE_TENANT = `UPDATE tenants SET host_sync_secret_hash = $2, disabled = $3, version = $4, primary_key_version = $5,
  primary_secret = $6, previous_key_version = $7, previous_secret = $8, updated_at = $9 WHERE tenant_id = $1`;

export function insertParams(r: TenantRow): unknown[] {
  return [
    r.tenant_id,
    r.host_sync_client_id,
    r.host_sync_secret_hash,
    r.disabled,
    r.version,
    r.primary_key_version,
    r.primary_secret,
    r.previous_key_version,
    r.previous_secret,
    r.created_at.toISOString(),
    r.updated_at.toISOString(),
  ];
}

export function updateParams(r: TenantRow): unknown[] {
  return [
    r.tenant_id,
    r.host_sync_secret_hash,
    r.disabled,
    r.version,
    r.primary_key_version,
    r.primary_secret,
    r.previous_key_version,
    r.previous_secret,
    r.updated_at.toISOString(),
  ];
}

/** pg and PGlite agree on most types; dates and integers are normalized here anyway. */
export function normalizeRow(raw: Record<string, unknown>): TenantRow {
  const r = raw as unknown as TenantRow;
  return {
    ...r,
    version: Number(r.version),
    primary_key_version: Number(r.primary_key_version),
    previous_key_version: r.previous_key_version === null ? null : Number(r.previous_key_version),
    created_at: toDate(r.created_at),
    updated_at: toDate(r.updated_at),
  };
}

export function rowToTenant(r: TenantRow): Tenant {
  return {
    tenantId: r.tenant_id,
    hostSyncClientId: r.host_sync_client_id,
    disabled: r.disabled,
    version: r.version,
    primaryKeyVersion: r.primary_key_version,
    previousKeyVersion: r.previous_key_version,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The columns the tenant rules decide on. */
export function rowState(r: TenantRow): TenantState {
  return {
    disabled: r.disabled,
    version: r.version,
    primaryKeyVersion: r.primary_key_version,
    primarySecret: r.primary_secret,
    previousKeyVersion: r.previous_key_version,
    previousSecret: r.previous_secret,
    hostSyncSecretHash: r.host_sync_secret_hash,
  };
}

export function withState(r: TenantRow, s: TenantState): TenantRow {
  return {
    ...r,
    disabled: s.disabled,
    version: s.version,
    primary_key_version: s.primaryKeyVersion,
    primary_secret: s.primarySecret,
    previous_key_version: s.previousKeyVersion,
    previous_secret: s.previousSecret,
    host_sync_secret_hash: s.hostSyncSecretHash,
  };
}

function toDate(v: unknown): Date {
  return v instanceof Date ? v : new Date(String(v));
}
