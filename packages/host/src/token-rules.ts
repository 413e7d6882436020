/**
 * The relay's rules for what a host signs (docs/CONTRACT.md "Tokens", docs/API.md
 * "Channel capabilities"), checked before signing so that a token the relay
 * would refuse is never handed out.
 *
 * A vendored copy: the verifier's own rules live in @service-relay/channels
 * (channel-capability.ts), @service-relay/core (ids.ts) and auth-verifier's
 * token-checker.ts, which a published SDK cannot depend on.
 * token-rules.test.ts runs both over the same cases so the two cannot drift
 * apart. The rule names are the verifier's
 * reason codes.
 */

/** What a `cap` pattern may allow. */
export const CHANNEL_ACTIONS = ['subscribe', 'publish', 'history', 'presence'] as const;
export type ChannelAction = (typeof CHANNEL_ACTIONS)[number];

/** The relay's default MAX_TOKEN_LIFETIME_S. */
export const DEFAULT_MAX_TOKEN_LIFETIME_S = 86_400;
/** The lifetime `signUserToken(userId)` uses when none is given. */
export const DEFAULT_TOKEN_TTL_S = 3_600;

const MAX_CAP_PATTERNS = 64;
const MAX_ACTIONS = 16;
const CAP_PATTERN = /^[A-Za-z0-9_.:-]{1,128}\*?$/;
const ANY_CASE_UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Which rule a refused signing request broke; the names are the verifier's reason codes (`bad_ttl` is the SDK's own). */
export type TokenRule = 'bad_user_id' | 'bad_tenant_id' | 'bad_ttl' | 'lifetime_too_long' | 'bad_cap';

export interface RuleBreach {
  rule: TokenRule;
  /** One sentence naming the rule and what is allowed. */
  problem: string;
}

export function checkUserId(userId: unknown): RuleBreach | undefined {
  if (typeof userId === 'string' && ANY_CASE_UUID.test(userId)) return undefined;
  return { rule: 'bad_user_id', problem: 'user_id must be a UUID in the 8-4-4-4-12 hex form (either case); map your own user ids to UUIDs' };
}

export function checkTenantId(tenantId: unknown): RuleBreach | undefined {
  if (typeof tenantId === 'string' && CANONICAL_UUID.test(tenantId)) return undefined;
  return { rule: 'bad_tenant_id', problem: 'tenantId must be the tenant id exactly as issued: a lowercase UUID' };
}

export function checkLifetime(ttlSeconds: unknown, maxSeconds: number): RuleBreach | undefined {
  if (typeof ttlSeconds !== 'number' || !Number.isSafeInteger(ttlSeconds) || ttlSeconds < 1) {
    return { rule: 'bad_ttl', problem: 'ttlSeconds must be a positive integer' };
  }
  if (ttlSeconds > maxSeconds) {
    return { rule: 'lifetime_too_long', problem: `ttlSeconds ${ttlSeconds} is over the relay's maximum token lifetime of ${maxSeconds} s (MAX_TOKEN_LIFETIME_S; the option maxTokenLifetimeSeconds)` };
  }
  return undefined;
}

/** The `cap` grammar: an object of 0..64 patterns, each `^[A-Za-z0-9_.:-]{1,128}\*?$`, each a non-empty array of known actions. */
export function checkCap(cap: unknown): RuleBreach | undefined {
  const breach = (problem: string): RuleBreach => ({ rule: 'bad_cap', problem: `cap: ${problem} (docs/API.md "Channel capabilities")` });
  if (typeof cap !== 'object' || cap === null || Array.isArray(cap)) return breach('must be an object of channel pattern to actions');
  const patterns = Object.keys(cap);
  if (patterns.length > MAX_CAP_PATTERNS) return breach(`at most ${MAX_CAP_PATTERNS} patterns, not ${patterns.length}`);
  for (const pattern of patterns) {
    if (!CAP_PATTERN.test(pattern)) {
      const hint = pattern === '*' ? ' (a bare "*" is refused: leave cap out to allow every channel)' : '';
      return breach(`pattern ${JSON.stringify(pattern.slice(0, 140))} is not a channel name of 1 to 128 of A-Z a-z 0-9 _ . : - optionally followed by one "*"${hint}`);
    }
    const actions = (cap as Record<string, unknown>)[pattern];
    const known = (a: unknown) => typeof a === 'string' && (CHANNEL_ACTIONS as readonly string[]).includes(a);
    if (!Array.isArray(actions) || actions.length === 0 || actions.length > MAX_ACTIONS || !actions.every(known)) {
      return breach(`the actions of ${JSON.stringify(pattern)} must be a non-empty array of ${CHANNEL_ACTIONS.join(', ')}`);
    }
  }
  return undefined;
}
