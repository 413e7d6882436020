import type { ChannelCapability } from '@service-relay/channels';

/**
 * The verifier's answer about one token: domain types only (no transport).
 * The verifier decides them (auth-verifier's token/), its callers read them
 * through @service-relay/verifier-client, and @service-relay/grpc maps them to
 * and from the wire (verify-result-wire.ts).
 */
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
