import { RelayError } from '@service-relay/core';
import type { CheckKind, VerifierClient } from './verifier-client';
import type { VerifiedIdentity, VerifyResult } from './verify-result';

/** What a consumer knows of the tenant feed: the position a verdict about a tenant must reflect. */
export interface FeedPositions {
  requiredSeq(tenantId: string): number;
}

/** Asks made with `min_seq` after a stale verdict, before failing closed. */
const FRESH_ASKS = 2;

/**
 * True when the verdict reflects every change of its tenant this consumer
 * has applied (a verdict from a verifier that predates `as_of_seq` counts as
 * position 0: fresh only for tenants with no change seen here).
 */
export function isFresh(identity: VerifiedIdentity, positions: FeedPositions): boolean {
  return (identity.asOfSeq ?? 0) >= positions.requiredSeq(identity.tenantId);
}

/**
 * A verdict no older than any change of its tenant this consumer has applied
 * (docs/ARCHITECTURE.md "Verdict freshness"): a valid verdict judged before
 * such a change (a stalled verifier answering from its cache, say) is asked
 * again with `min_seq`, which makes the verifier catch up or ask the registry.
 * Still stale after that: RelayError('auth_unavailable'), never a pass.
 * Refusals are returned as they are: refusing is never unsafe.
 */
export async function verifyFresh(client: VerifierClient, positions: FeedPositions, token: string, kind: CheckKind = 'admission'): Promise<VerifyResult> {
  let result = await client.verify(token, kind);
  for (let ask = 0; ask < FRESH_ASKS && result.valid && !isFresh(result.identity, positions); ask++) {
    result = await client.verify(token, kind, positions.requiredSeq(result.identity.tenantId));
  }
  if (result.valid && !isFresh(result.identity, positions)) throw new RelayError('auth_unavailable', 'the verifier could not judge on state after a tenant change');
  return result;
}
