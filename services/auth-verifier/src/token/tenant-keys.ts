import type { KeyObject } from 'node:crypto';
import type { KeySlot } from '@service-relay/verdict';
import { secretKeyObject } from './hs256';

export interface SigningKey {
  /** Pre-built once per secret, so no check pays for key preparation. */
  key: KeyObject;
  keyVersion: number;
  slot: KeySlot;
}

/** A tenant's token-relevant state, as the registry reports it. */
export interface KnownTenant {
  found: true;
  tenantId: string;
  disabled: boolean;
  /** Tenant state version; increases with every change that affects tokens. */
  version: number;
  /** Primary first, then previous when there is one. */
  keys: readonly SigningKey[];
  /** Lowercase user id -> unix seconds: that user's tokens with `iat` absent or earlier are rejected. */
  revokedUsers: ReadonlyMap<string, number>;
  /** The tenant-feed sequence the registry's answer reflected (absent: unknown). */
  asOfSeq?: number;
}

export interface UnknownTenant {
  found: false;
  tenantId: string;
  version: number;
  asOfSeq?: number;
}

export type TenantKeys = KnownTenant | UnknownTenant;

/** The key material in its plain form, as the registry and the shared cache carry it. */
export interface TenantKeysData {
  found: boolean;
  disabled: boolean;
  version: number;
  /** The tenant feed sequence the registry's answer reflects. */
  asOfSeq?: number;
  primary?: { secret: string; keyVersion: number } | undefined;
  previous?: { secret: string; keyVersion: number } | undefined;
  /** User-level revocations (user id lowercase, `before` unix seconds); absent means none. */
  userRevocations?: ReadonlyArray<{ userId: string; before: number }> | undefined;
}

export function buildTenantKeys(tenantId: string, data: TenantKeysData): TenantKeys {
  const asOfSeq = data.asOfSeq ?? 0;
  if (!data.found) return { found: false, tenantId, version: data.version, asOfSeq };
  const keys: SigningKey[] = [];
  if (data.primary) keys.push({ key: secretKeyObject(data.primary.secret), keyVersion: data.primary.keyVersion, slot: 'primary' });
  if (data.previous) keys.push({ key: secretKeyObject(data.previous.secret), keyVersion: data.previous.keyVersion, slot: 'previous' });
  const revokedUsers = new Map<string, number>();
  for (const r of data.userRevocations ?? []) revokedUsers.set(r.userId.toLowerCase(), Math.max(r.before, revokedUsers.get(r.userId.toLowerCase()) ?? 0));
  return { found: true, tenantId, disabled: data.disabled, version: data.version, keys, revokedUsers, asOfSeq };
}
