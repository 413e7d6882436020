import type { KeyObject } from 'node:crypto';
import type { KeySlot } from '@service-relay/verifier-client';
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
}

export interface UnknownTenant {
  found: false;
  tenantId: string;
  version: number;
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
}

export function buildTenantKeys(tenantId: string, data: TenantKeysData): TenantKeys {
  if (!data.found) return { found: false, tenantId, version: data.version };
  const keys: SigningKey[] = [];
  if (data.primary) keys.push({ key: secretKeyObject(data.primary.secret), keyVersion: data.primary.keyVersion, slot: 'primary' });
  if (data.previous) keys.push({ key: secretKeyObject(data.previous.secret), keyVersion: data.previous.keyVersion, slot: 'previous' });
  return { found: true, tenantId, disabled: data.disabled, version: data.version, keys };
}
