import { isUtf8 } from 'node:buffer';
import type { Clock } from '@service-relay/core';
import { isCanonicalUuid, isUuid, MAX_TOKEN_BYTES } from '@service-relay/core';
import { parseCapability, type ChannelCapability } from '@service-relay/channels';
import { LRUCache } from 'lru-cache';
import type { VerifiedIdentity } from '@service-relay/verdict';
import { canonicalTail, isCanonicalBase64url } from './base64url';
import { hasDuplicateMembers } from './duplicate-members';
import { hs256Matches } from './hs256';
import type { RejectReason } from './reject-reason';
import type { TenantKeys } from './tenant-keys';

export const ISSUER = 'service-relay';
export const AUDIENCE = 'service-relay';

export type CheckResult = { valid: true; identity: VerifiedIdentity } | { valid: false; reason: RejectReason };

/** A token that passed every rule that needs no key material. */
export interface ParsedToken {
  ok: true;
  tenantId: string;
  userId: string;
  exp: number;
  /** The validated `cap` claim; undefined when the token has none. */
  cap: ChannelCapability | undefined;
  /** `iat` when it is an integer (the contract does not validate it; a user revocation counts anything else as absent). */
  iat: number | undefined;
  signingInput: string;
  signature: Buffer;
}

export type ParseResult = ParsedToken | { ok: false; reason: RejectReason };

export interface TokenCheckerOptions {
  clock: Clock;
  maxLifetimeS: number;
}

const reject = (reason: RejectReason): { ok: false; reason: RejectReason } => ({ ok: false, reason });

/**
 * The contract's token rules (CONTRACT.md "Tokens"), cheapest first: parse()
 * runs everything that needs no key, checkKeys() the tenant state and the
 * HMAC against primary, then previous. Pure: no I/O, time from the clock.
 */
export class TokenChecker {
  private readonly clock: Clock;
  private readonly maxLifetimeMs: number;
  /**
   * Header segment -> kid for headers that passed every header rule. A host
   * signs every token of a tenant with the same header, and the verdict on a
   * header depends on nothing but its bytes, so this skips a decode and a
   * JSON parse per check. Bounded LRU (lru-cache). Measured against the
   * Map this was (node 20): a hit ~26 ns instead of ~17 ns, under 0.2% of a
   * ~6.5 us check (check-speed ratio 0.50/0.52 before, 0.48-0.57 after, within
   * its noise); inserting past the bound ~1.7 us instead of ~2.2 us.
   */
  private readonly headers = new LRUCache<string, string>({ max: MAX_CACHED_HEADERS });
  constructor(opts: TokenCheckerOptions) {
    this.clock = opts.clock;
    this.maxLifetimeMs = opts.maxLifetimeS * 1000;
  }

  parse(token: string): ParseResult {
    // The length check is on UTF-16 units; anything non-ASCII fails the
    // alphabet check below, so for every token that can pass, units are bytes.
    if (token.length > MAX_TOKEN_BYTES) return reject('too_large');
    const d1 = token.indexOf('.');
    const d2 = d1 < 0 ? -1 : token.indexOf('.', d1 + 1);
    if (d2 < 0 || token.indexOf('.', d2 + 1) >= 0) return reject('malformed');
    // One pass over payload and signature for the alphabet, then the
    // last-character rule of each; the header is checked only when new.
    BODY_ALPHABET.lastIndex = d1 + 1;
    if (!BODY_ALPHABET.test(token) || !canonicalTail(token, d1 + 1, d2) || !canonicalTail(token, d2 + 1, token.length)) return reject('malformed');

    // No cache of parsed claims by token: hashing the ~300-character key and
    // evicting costs about as much as the parse it would save (measured).
    const claims = this.parseClaims(token, d1, d2);
    if (!isClaims(claims)) return claims;
    const signingInput = token.slice(0, d2);

    // The only rules whose verdict changes with time.
    const expMs = claims.exp * 1000;
    const now = this.clock.now();
    if (now >= expMs) return reject('expired');
    if (expMs - now > this.maxLifetimeMs) return reject('lifetime_too_long');
    return { ok: true, tenantId: claims.tenantId, userId: claims.userId, exp: claims.exp, cap: claims.cap, iat: claims.iat, signingInput, signature: Buffer.from(token.slice(d2 + 1), 'base64url') };
  }

  /** Every rule that depends on the header and payload bytes alone. */
  private parseClaims(token: string, d1: number, d2: number): Claims | { ok: false; reason: RejectReason } {
    const headerSeg = token.slice(0, d1);
    let kid = this.headers.get(headerSeg);
    let header: Record<string, unknown> | undefined;
    if (kid === undefined) {
      if (!isCanonicalBase64url(headerSeg)) return reject('malformed');
      const parsed = parseSegment(headerSeg);
      if (typeof parsed === 'string') return reject(parsed);
      header = parsed;
    }
    const payload = parseSegment(token.slice(d1 + 1, d2));
    if (typeof payload === 'string') return reject(payload);

    if (header !== undefined) {
      const checked = checkHeaderRules(header);
      if (typeof checked !== 'string') return checked;
      kid = checked;
      this.headers.set(headerSeg, kid);
    }

    if (payload.iss !== ISSUER) return reject('bad_issuer');
    if (payload.aud !== AUDIENCE) return reject('bad_audience');
    const exp = payload.exp;
    if (typeof exp !== 'number' || !Number.isSafeInteger(exp)) return reject('bad_exp');
    const tenantId = payload.tenant_id;
    if (!isCanonicalUuid(tenantId)) return reject('bad_tenant_id');
    const userId = payload.user_id;
    if (!isUuid(userId)) return reject('bad_user_id');
    if (kid !== tenantId) return reject('kid_mismatch');
    // Optional (issue #13); when present it must be well-formed, or the token is refused like any other bad claim.
    let cap: ChannelCapability | undefined;
    if (Object.hasOwn(payload, 'cap')) {
      cap = parseCapability(payload.cap);
      if (cap === undefined) return reject('bad_cap');
    }
    const iat = typeof payload.iat === 'number' && Number.isSafeInteger(payload.iat) ? payload.iat : undefined;
    return { tenantId, userId, exp, cap, iat };
  }

  /** The rules that need the tenant: state, then primary, then previous. */
  checkKeys(parsed: ParsedToken, tenant: TenantKeys): CheckResult {
    if (!tenant.found || tenant.tenantId !== parsed.tenantId) return { valid: false, reason: 'unknown_tenant' };
    if (tenant.disabled) return { valid: false, reason: 'tenant_disabled' };
    for (const k of tenant.keys) {
      if (hs256Matches(parsed.signingInput, parsed.signature, k.key)) {
        // After the signature: only a token the host really issued can be "revoked".
        if (isUserRevoked(tenant.revokedUsers, parsed)) return { valid: false, reason: 'user_revoked' };
        return {
          valid: true,
          identity: {
            tenantId: parsed.tenantId,
            userId: parsed.userId,
            expiresAt: parsed.exp,
            keySlot: k.slot,
            keyVersion: k.keyVersion,
            ...(parsed.cap !== undefined && { cap: parsed.cap }),
            ...(parsed.iat !== undefined && { issuedAt: parsed.iat }),
          },
        };
      }
    }
    return { valid: false, reason: 'bad_signature' };
  }

  /** parse() and checkKeys() with a synchronous key lookup (benchmarks, tools). */
  check(token: string, lookup: (tenantId: string) => TenantKeys): CheckResult {
    const parsed = this.parse(token);
    if (!parsed.ok) return { valid: false, reason: parsed.reason };
    return this.checkKeys(parsed, lookup(parsed.tenantId));
  }
}

const MAX_CACHED_HEADERS = 4096;

interface Claims {
  tenantId: string;
  userId: string;
  exp: number;
  cap: ChannelCapability | undefined;
  iat: number | undefined;
}

/**
 * A host's revoke_tokens (#13): that user's tokens whose `iat` is absent or
 * earlier than `before` are refused; user ids compare case-insensitively.
 */
export function isUserRevoked(revokedUsers: ReadonlyMap<string, number>, token: { userId: string; iat: number | undefined }): boolean {
  if (revokedUsers.size === 0) return false;
  const before = revokedUsers.get(token.userId.toLowerCase());
  return before !== undefined && (token.iat === undefined || token.iat < before);
}

function isClaims(v: Claims | { ok: false }): v is Claims {
  return !('ok' in v);
}
/** Payload '.' signature, from lastIndex to the end: the alphabet only, both segments non-empty. */
const BODY_ALPHABET = /[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/y;

/** The header rules; the kid when they all hold. */
function checkHeaderRules(header: Record<string, unknown>): string | { ok: false; reason: RejectReason } {
  if (header.alg !== 'HS256') return reject('bad_alg');
  const kid = header.kid;
  if (typeof kid !== 'string' || Object.hasOwn(header, 'crit')) return reject('bad_header');
  if (Object.hasOwn(header, 'typ') && header.typ !== 'JWT') return reject('bad_header');
  return kid;
}

/** A canonical segment to a JSON object without duplicate member names, or why not. */
function parseSegment(segment: string): Record<string, unknown> | RejectReason {
  const bytes = Buffer.from(segment, 'base64url');
  const text = bytes.toString('utf8');
  // Invalid UTF-8 decodes to U+FFFD, so two different byte strings could read
  // as the same claims; only a text holding U+FFFD needs the full validation.
  if (text.includes('\uFFFD') && !isUtf8(bytes)) return 'malformed';
  const value = parseObject(text);
  if (value === undefined) return 'malformed';
  if (hasDuplicateMembers(text, value)) return 'duplicate_member';
  return value;
}

function parseObject(text: string): Record<string, unknown> | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}
