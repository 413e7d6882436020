/**
 * Why a token was rejected: a closed set, for logs and metrics only. End
 * clients always see the single `invalid_or_missing_token`.
 */
export const REJECT_REASONS = [
  'too_large',
  'malformed',
  'duplicate_member',
  'bad_header',
  'bad_alg',
  'bad_issuer',
  'bad_audience',
  'bad_exp',
  'expired',
  'lifetime_too_long',
  'bad_tenant_id',
  'bad_user_id',
  'bad_cap',
  'kid_mismatch',
  'unknown_tenant',
  'tenant_disabled',
  'bad_signature',
  // The host revoked this user's tokens issued before a moment, and this one has no `iat` or an earlier one (#13).
  'user_revoked',
] as const;

export type RejectReason = (typeof REJECT_REASONS)[number];
