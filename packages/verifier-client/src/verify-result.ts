import { capabilityFromJson, capabilityJson, type ChannelCapability } from '@service-relay/core';
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
  /** The token's `cap` claim, validated; undefined when the token has none (no channel restriction). */
  cap?: ChannelCapability | undefined;
  /** The token's integer `iat`, seconds since the epoch; undefined when it has none (a user revocation closes such a connection). */
  issuedAt?: number | undefined;
  /**
   * The tenant-feed sequence the verdict reflects: every change at or below it
   * was applied to the state it was judged on (a zookie, docs/ARCHITECTURE.md
   * "Verdict freshness"). Undefined from verifiers that predate it.
   */
  asOfSeq?: number | undefined;
}

export type VerifyResult = { valid: true; identity: VerifiedIdentity } | { valid: false; reason: string };


export function fromWire(r: VerifyResponseWire): VerifyResult {
  if (!r.valid) return { valid: false, reason: r.reason || 'invalid' };
  let cap: ChannelCapability | undefined;
  if (r.cap_json) {
    cap = capabilityFromJson(r.cap_json);
    // The verifier only sends what it validated; anything else fails closed.
    if (cap === undefined) return { valid: false, reason: 'bad_cap' };
  }
  return {
    valid: true,
    identity: {
      tenantId: r.tenant_id,
      userId: r.user_id,
      expiresAt: r.expires_at,
      keySlot: r.key_slot === 'KEY_SLOT_PREVIOUS' ? 'previous' : 'primary',
      keyVersion: r.key_version,
      ...(cap !== undefined && { cap }),
      ...(typeof r.issued_at === 'number' && r.issued_at > 0 && { issuedAt: r.issued_at }),
      ...(typeof r.as_of_seq === 'number' && r.as_of_seq > 0 && { asOfSeq: r.as_of_seq }),
    },
  };
}

export function toWire(result: VerifyResult): VerifyResponseWire {
  if (!result.valid) {
    return { valid: false, tenant_id: '', user_id: '', expires_at: 0, key_slot: 'KEY_SLOT_UNSPECIFIED', key_version: 0, reason: result.reason, cap_json: '', issued_at: 0, as_of_seq: 0 };
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
    cap_json: i.cap === undefined ? '' : capabilityJson(i.cap),
    issued_at: i.issuedAt ?? 0,
    as_of_seq: i.asOfSeq ?? 0,
  };
}
