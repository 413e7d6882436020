import { LEGACY_KEY_ID } from '@service-relay/core';
import { callbackSecretAad, jwtSecretAad, webhookSecretAad } from '../crypto/tenant-crypto';

/** A column holding sealed values, and the associated data each was sealed with. */
export interface SealedColumn {
  column: string;
  aad(row: Record<string, unknown>): string;
}

/** A table with sealed columns, walked in primary key order by the re-encryption. */
export interface SealedTable {
  table: string;
  /** Its primary key (uuid), the re-encryption's position. */
  key: string;
  /** Further columns the associated data needs. */
  extra: readonly string[];
  columns: readonly SealedColumn[];
}

/**
 * Every sealed value the registry stores, but the host-sync hash key (one
 * value in secrets_keyring). A new kind of sealed secret is added here, or it
 * is neither counted nor re-encrypted (secrets-keyring.contract.ts checks
 * the list against every column holding a `v1.` value).
 */
export const SEALED_TABLES: readonly SealedTable[] = [
  {
    table: 'tenants',
    key: 'tenant_id',
    extra: ['primary_key_version', 'previous_key_version'],
    columns: [
      { column: 'primary_secret', aad: (r) => jwtSecretAad(String(r.tenant_id), Number(r.primary_key_version)) },
      { column: 'previous_secret', aad: (r) => jwtSecretAad(String(r.tenant_id), Number(r.previous_key_version)) },
    ],
  },
  {
    table: 'tenant_callbacks',
    key: 'tenant_id',
    extra: ['secret_version', 'previous_secret_version'],
    columns: [
      { column: 'secret_sealed', aad: (r) => callbackSecretAad(String(r.tenant_id), Number(r.secret_version)) },
      { column: 'previous_secret_sealed', aad: (r) => callbackSecretAad(String(r.tenant_id), Number(r.previous_secret_version)) },
    ],
  },
  {
    table: 'webhook_endpoints',
    key: 'endpoint_id',
    extra: [],
    columns: [
      { column: 'secret', aad: (r) => webhookSecretAad(String(r.endpoint_id)) },
      { column: 'previous_secret', aad: (r) => webhookSecretAad(String(r.endpoint_id)) },
    ],
  },
];

/** SQL: the key id of the sealed value in `column` (`v1.` is k0; `v2.<id>.` is id). */
export function keyIdSql(column: string): string {
  return `CASE WHEN starts_with(${column}, 'v1.') THEN '${LEGACY_KEY_ID}' ELSE split_part(${column}, '.', 2) END`;
}

/** SQL: how many sealed values each key id sealed, over every sealed column (rows `key_id`, `n`). */
export const COUNT_BY_KEY_SQL = `SELECT key_id, count(*) AS n FROM (${SEALED_TABLES.flatMap((t) =>
  t.columns.map((c) => `SELECT ${keyIdSql(c.column)} AS key_id FROM ${t.table} WHERE ${c.column} IS NOT NULL`),
).join(' UNION ALL ')}) s GROUP BY key_id`;
