import { SignJWT } from 'jose';
import { HostClientError } from './host-client-error.js';
import { RELAY_ISSUER } from './secret-fetch.js';
import { checkCap, checkLifetime, checkUserId, DEFAULT_TOKEN_TTL_S, type ChannelAction, type RuleBreach } from './token-rules.js';

export type { ChannelAction } from './token-rules.js';

/** Any JSON value. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/**
 * The `cap` claim: channel pattern (a channel name, optionally ending in `*`)
 * to the actions it allows, e.g. {"orders.*": ["subscribe", "history"]}.
 * At most 64 patterns; a cap that breaks the grammar is refused before signing.
 */
export type ChannelCap = Readonly<Record<string, readonly ChannelAction[]>>;

export interface UserTokenOptions {
  /** Seconds until `exp`: a positive integer, at most the client's `maxTokenLifetimeSeconds` (default 86400). Default 3600. */
  ttlSeconds?: number;
  /** The `cap` claim (checked against the grammar, then signed unchanged). Default: none (every channel the tenant's rules allow). */
  cap?: ChannelCap;
}

export function refuse(breach: RuleBreach): never {
  throw new HostClientError('token_rule', `signUserToken refused (${breach.rule}): ${breach.problem}`, { rule: breach.rule, problem: breach.problem });
}

/**
 * A token of the contract's exact shape: header {alg: HS256, typ: JWT, kid: tenant},
 * claims iss, aud, iat, exp, tenant_id, user_id (and cap when given). `iat`
 * lets a user-level revocation (revokeUserTokens) tell the tokens issued
 * before it from the ones issued after. A request the relay would refuse
 * throws a HostClientError `token_rule` naming the rule, before signing.
 */
export function signToken(key: Uint8Array, tenantId: string, userId: string, opts: UserTokenOptions, maxLifetimeS: number, nowMs: number): Promise<string> {
  const breach = checkUserTokenRequest(userId, opts, maxLifetimeS);
  if (breach) refuse(breach);
  const ttlSeconds = opts.ttlSeconds ?? Math.min(DEFAULT_TOKEN_TTL_S, maxLifetimeS);
  const claims: Record<string, JsonValue> = { tenant_id: tenantId, user_id: userId };
  if (opts.cap !== undefined) claims.cap = opts.cap as unknown as JsonValue;
  const nowS = Math.floor(nowMs / 1000);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: tenantId })
    .setIssuer(RELAY_ISSUER)
    .setAudience(RELAY_ISSUER)
    .setIssuedAt(nowS)
    .setExpirationTime(nowS + ttlSeconds)
    .sign(key);
}

/** Checks the signing request without signing: the breach, or undefined when the relay would accept it. */
export function checkUserTokenRequest(userId: string, opts: UserTokenOptions, maxLifetimeS: number): RuleBreach | undefined {
  const ttlSeconds = opts.ttlSeconds ?? Math.min(DEFAULT_TOKEN_TTL_S, maxLifetimeS);
  return checkUserId(userId) ?? checkLifetime(ttlSeconds, maxLifetimeS) ?? (opts.cap === undefined ? undefined : checkCap(opts.cap));
}
