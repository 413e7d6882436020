import type { RejectReason } from './reject-reason';

export interface RejectExplanation {
  /** What the rule the token broke is. */
  meaning: string;
  /** What the host (or operator) changes so the next token passes. */
  fix: string;
}

/**
 * Every reason code, for operators (`explain-token`, the admin API's
 * explain_token). A Record, so a new code does not compile without its
 * explanation; docs/API.md "Why a token is refused" holds the same table.
 */
export const REJECT_EXPLANATIONS: Readonly<Record<RejectReason, RejectExplanation>> = Object.freeze({
  too_large: {
    meaning: 'The token is longer than 8192 bytes.',
    fix: 'Sign only the claims the service reads (tenant_id, user_id, iss, aud, exp, optional iat and cap); keep cap to the patterns the user needs.',
  },
  malformed: {
    meaning: 'Not a compact JWS: not three base64url segments without padding, a segment that is not canonical base64url, or a header or payload that is not a UTF-8 JSON object.',
    fix: 'Send the token exactly as the JWT library produced it (header.payload.signature), without quotes, spaces, "Bearer " or padding.',
  },
  duplicate_member: {
    meaning: 'The header or the payload names the same member twice.',
    fix: 'Build the claims as an object in a JWT library rather than by concatenating JSON text.',
  },
  bad_header: {
    meaning: 'The header has no string `kid`, has a `crit` member, or a `typ` other than "JWT".',
    fix: 'Set the protected header to {"alg":"HS256","typ":"JWT","kid":"<tenant_id>"}.',
  },
  bad_alg: {
    meaning: 'The header `alg` is not "HS256" (RS256, none and every other algorithm are refused).',
    fix: 'Sign with HS256 and the tenant secret from the host-sync fetch.',
  },
  bad_issuer: {
    meaning: 'The `iss` claim is not "service-relay".',
    fix: 'Set iss to "service-relay".',
  },
  bad_audience: {
    meaning: 'The `aud` claim is not the string "service-relay" (an array is refused too).',
    fix: 'Set aud to the string "service-relay".',
  },
  bad_exp: {
    meaning: 'The `exp` claim is missing or not an integer number of seconds since the epoch.',
    fix: 'Set exp to an integer: now (in seconds, not milliseconds) plus the token lifetime.',
  },
  expired: {
    meaning: 'The token expired: `exp` is at or before the verifier\'s clock.',
    fix: 'Sign a new token (clients refresh before exp); check the host\'s clock if fresh tokens are refused.',
  },
  lifetime_too_long: {
    meaning: '`exp` is further in the future than the maximum lifetime (MAX_TOKEN_LIFETIME_S, 86400 s by default), or is in milliseconds.',
    fix: 'Sign short-lived tokens (minutes) with exp in seconds; the maximum is the verifier\'s MAX_TOKEN_LIFETIME_S.',
  },
  bad_tenant_id: {
    meaning: 'The `tenant_id` claim is not a lowercase canonical UUID.',
    fix: 'Copy tenant_id exactly as create-tenant printed it (lowercase, with hyphens).',
  },
  bad_user_id: {
    meaning: 'The `user_id` claim is not a UUID (a name such as "alice" is refused).',
    fix: 'Map each of your users to a stable UUID and sign that.',
  },
  bad_cap: {
    meaning: 'The optional `cap` claim is outside its grammar (docs/API.md "Channel capabilities"): not an object of channel patterns to arrays of subscribe/publish/history/presence, or a bad pattern.',
    fix: 'Omit cap, or send e.g. {"room-*":["subscribe","publish"]}; a bare "*" is not a cap.',
  },
  kid_mismatch: {
    meaning: 'The header `kid` is not the token\'s `tenant_id`.',
    fix: 'Set kid to the same tenant_id as the claim.',
  },
  unknown_tenant: {
    meaning: 'No tenant has this tenant_id (it was never created, or it was deleted).',
    fix: 'Use the tenant_id create-tenant printed for this deployment; a tenant of another deployment is unknown here.',
  },
  tenant_disabled: {
    meaning: 'The tenant is disabled by an operator; every token of it is refused.',
    fix: 'An operator enables it again (`npm run admin -- enable <tenant_id>`).',
  },
  bad_signature: {
    meaning: 'The HMAC matches neither the tenant\'s primary nor its previous secret: signed with another secret (the host-sync client secret, an old secret past expire_previous or revoke_all, another tenant\'s) or altered after signing.',
    fix: 'Fetch the current secret (POST /api/host/tenants/{id}/jwt_secret/fetch) and sign with jwt_secret_primary, encoded as UTF-8 bytes.',
  },
  user_revoked: {
    meaning: 'The host revoked this user\'s tokens issued before a moment (revoke_tokens), and this token has no `iat` or an earlier one.',
    fix: 'Sign a new token for the user with iat set to now.',
  },
});
