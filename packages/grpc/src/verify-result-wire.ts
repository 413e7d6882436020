import { capabilityFromJson, capabilityJson, type ChannelCapability } from '@service-relay/channels';
import type { VerifyResult } from '@service-relay/verdict';
import type { VerifyResponseWire } from './verifier-wire';

/** A verdict (@service-relay/verdict) to and from relay.auth.v1.VerifyResponse. */
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
