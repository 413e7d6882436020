import { SignJWT } from 'jose';
import { RELAY_ISSUER } from './secret-fetch';

/** Any JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** What a `cap` pattern may allow (docs/API.md "Channel capabilities"). */
export type ChannelAction = 'subscribe' | 'publish' | 'history' | 'presence';

/**
 * The `cap` claim: channel pattern (a channel name, optionally ending in `*`)
 * to the actions it allows, e.g. {"orders.*": ["subscribe", "history"]}.
 * At most 64 patterns; a token whose cap breaks the grammar is refused as a whole.
 */
export type ChannelCap = Readonly<Record<string, readonly ChannelAction[]>>;

export interface UserTokenOptions {
  /** Seconds until `exp`; a positive integer, at most the relay's MAX_TOKEN_LIFETIME_S (default 86400). */
  ttlSeconds: number;
  /** The `cap` claim, passed through unchanged when given (the verifier validates it, realtime decides with it). */
  cap?: ChannelCap;
}

const USER_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A token of the contract's exact shape: header {alg: HS256, typ: JWT, kid: tenant},
 * claims iss, aud, iat, exp, tenant_id, user_id (and cap when given). `iat`
 * lets a user-level revocation (revokeUserTokens) tell the tokens issued
 * before it from the ones issued after. Misuse throws a TypeError.
 */
export function signToken(key: Uint8Array, tenantId: string, userId: string, opts: UserTokenOptions, nowMs: number): Promise<string> {
  if (typeof userId !== 'string' || !USER_ID.test(userId)) throw new TypeError('userId must be a UUID (8-4-4-4-12 hex)');
  if (!Number.isSafeInteger(opts.ttlSeconds) || opts.ttlSeconds < 1) throw new TypeError('ttlSeconds must be a positive integer');
  const claims: Record<string, JsonValue> = { tenant_id: tenantId, user_id: userId };
  if (opts.cap !== undefined) claims.cap = opts.cap as unknown as JsonValue;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: tenantId })
    .setIssuer(RELAY_ISSUER)
    .setAudience(RELAY_ISSUER)
    .setIssuedAt(Math.floor(nowMs / 1000))
    .setExpirationTime(Math.floor(nowMs / 1000) + opts.ttlSeconds)
    .sign(key);
}
