import type { Tenant } from '../tenants/tenant';
import { sortedLabels, type TenantLabels } from '../tenants/tenant-meta';
import type { TenantState } from '../tenants/tenant-rules';

/** The tenants table, column for column. */
export interface TenantRow {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_secret_hash: string;
  /** The replaced host-sync secret's hash while a rotation overlaps (#33); null: none. */
  previous_host_sync_secret_hash: string | null;
  disabled: boolean;
  version: number;
  primary_key_version: number;
  primary_secret: string;
  previous_key_version: number | null;
  previous_secret: string | null;
  created_at: Date;
  updated_at: Date;
  /** Display name and labels (#30); never token-relevant. */
  name: string | null;
  labels: TenantLabels;
}

const COLUMNS = [
  'tenant_id',
  'host_sync_client_id',
  'host_sync_secret_hash',
  'previous_host_sync_secret_hash',
  'disabled',
  'version',
  'primary_key_version',
  'primary_secret',
  'previous_key_version',
  'previous_secret',
  'created_at',
  'updated_at',
  'name',
  'labels',
] as const satisfies readonly (keyof TenantRow)[];
/** What a change may write: never the id, the host-sync client id or the creation time. */
const UPDATED_COLUMNS = COLUMNS.filter((c) => c !== 'tenant_id' && c !== 'host_sync_client_id' && c !== 'created_at');

export const TENANT_COLUMNS = COLUMNS.join(', ');

export const INSERT_TENANT = `INSERT INTO tenants (${TENANT_COLUMNS}) VALUES (${COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`;

export const UPDATE_TENANT = `UPDATE tenants SET ${UPDATED_COLUMNS.map((c, i) => `${c} = $${i + 2}`).join(', ')} WHERE tenant_id = $1`;

function param(r: TenantRow, column: keyof TenantRow): unknown {
  const v = r[column];
  if (column === 'labels') return JSON.stringify(v);
  return v instanceof Date ? v.toISOString() : v;
}

export function insertParams(r: TenantRow): unknown[] {
  return COLUMNS.map((c) => param(r, c));
}

export function updateParams(r: TenantRow): unknown[] {
  return [r.tenant_id, ...UPDATED_COLUMNS.map((c) => param(r, c))];
}

/** pg and PGlite agree on most types; dates and integers are normalized here anyway. */
export function normalizeRow(raw: Record<string, unknown>): TenantRow {
  const r = raw as unknown as TenantRow;
  return {
    ...r,
    version: Number(r.version),
    primary_key_version: Number(r.primary_key_version),
    previous_key_version: r.previous_key_version === null ? null : Number(r.previous_key_version),
    previous_host_sync_secret_hash: r.previous_host_sync_secret_hash ?? null,
    created_at: toDate(r.created_at),
    updated_at: toDate(r.updated_at),
    name: r.name ?? null,
    labels: toLabels(r.labels),
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
    hasPreviousHostSync: r.previous_host_sync_secret_hash !== null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    name: r.name,
    labels: r.labels,
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
    previousHostSyncSecretHash: r.previous_host_sync_secret_hash,
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
    previous_host_sync_secret_hash: s.previousHostSyncSecretHash,
  };
}

/** jsonb comes back parsed from pg and PGlite alike; a string (a driver that does not parse it) is parsed here. */
function toLabels(v: unknown): TenantLabels {
  const parsed: unknown = typeof v === 'string' ? JSON.parse(v) : v;
  return parsed && typeof parsed === 'object' ? sortedLabels(parsed as Record<string, string>) : {};
}

function toDate(v: unknown): Date {
  return v instanceof Date ? v : new Date(String(v));
}
