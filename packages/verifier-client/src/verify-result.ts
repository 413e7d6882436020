import type { VerifyResponseWire } from '@service-relay/grpc';

export type KeySlot = 'primary' | 'previous';

export interface VerifiedIdentity {
  tenantId: string;
  userId: string;
  /** The token's exp, seconds since the epoch. */
  expiresAt: number;
  keySlot: KeySlot;
  /** The exact secret that matched; expire_previous revokes by it. */
  keyVersion: number;
}

export type VerifyResult = { valid: true; identity: VerifiedIdentity } | { valid: false; reason: string };


export function fromWire(r: VerifyResponseWire): VerifyResult {
  if (!r.valid) return { valid: false, reason: r.reason || 'invalid' };
  return {
    valid: true,
    identity: {
      tenantId: r.tenant_id,
      userId: r.user_id,
      expiresAt: r.expires_at,
      keySlot: r.key_slot === 'KEY_SLOT_PREVIOUS' ? 'previous' : 'primary',
      keyVersion: r.key_version,
    },
  };
}

export function toWire(result: VerifyResult): VerifyResponseWire {
  if (!result.valid) {
    return { valid: false, tenant_id: '', user_id: '', expires_at: 0, key_slot: 'KEY_SLOT_UNSPECIFIED', key_version: 0, reason: result.reason };
  }
  const i = result.identity;
  return {
    valid: true,
    tenant_id: i.tenantId,
    user_id: i.userId,
    expires_at: i.expiresAt,
    key_slot: i.keySlot === 'previous' ? 'KEY_SLOT_PREVIOUS' : 'KEY_SLOT_PRIMARY',
    key_version: i.keyVersion,
    reason: '',
  };
}
