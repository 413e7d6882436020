import { createHmac, randomBytes } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import { b64url, forgeToken, jsonFor, jsonWithDuplicate, malform, signToken, tokenClaims, tokenHeader, type ForgeOptions, type Json } from '@service-relay/testkit';
import { describe, expect, it } from 'vitest';
import { isCanonicalBase64url } from './base64url';
import { REJECT_REASONS, type RejectReason } from './reject-reason';
import { buildTenantKeys, type TenantKeys } from './tenant-keys';
import { MAX_TOKEN_BYTES } from '@service-relay/core';
import { TokenChecker } from './token-checker';

const NOW_S = 1_700_000_000;
const MAX_LIFETIME_S = 86_400;
const T = '5b0c5a7e-3f1d-4c2a-9e8b-7a6d5c4b3a21';
const D = '0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0';
const U = '11111111-2222-4333-8444-555555555555';
const USER = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
/** A user of T whose host revoked its tokens issued before NOW_S (#13). */
const REVOKED = '7c6b5a49-3827-4165-9f4e-3d2c1b0a9f8e';
const PRIMARY = 'prim-' + 'a'.repeat(38);
const PREVIOUS = 'prev-' + 'b'.repeat(38);
const DISABLED_SECRET = 'disa-' + 'c'.repeat(38);

const tenants = new Map<string, TenantKeys>([
  [T, buildTenantKeys(T, { found: true, disabled: false, version: 4, primary: { secret: PRIMARY, keyVersion: 2 }, previous: { secret: PREVIOUS, keyVersion: 1 }, userRevocations: [{ userId: REVOKED, before: NOW_S }] })],
  [D, buildTenantKeys(D, { found: true, disabled: true, version: 3, primary: { secret: DISABLED_SECRET, keyVersion: 1 } })],
]);
const lookup = (id: string): TenantKeys => tenants.get(id) ?? { found: false, tenantId: id, version: 0 };

const header = (extra: Json = {}, tenant = T): Json => ({ ...tokenHeader(tenant), ...extra });
const claims = (extra: Json = {}, tenant = T): Json => ({ ...tokenClaims({ tenantId: tenant, userId: USER, now: NOW_S * 1000, expiresIn: 600 }), ...extra });
const without = (o: Json, key: string): Json => Object.fromEntries(Object.entries(o).filter(([k]) => k !== key));
const forge = (o: Partial<ForgeOptions> = {}): string => forgeToken({ secret: PRIMARY, header: header(), payload: claims(), ...o });
const valid = forge();
const revoked = (extra: Json): Json => claims({ user_id: REVOKED, ...extra });

/** A valid token whose length is exactly `n` characters, grown by an unvalidated claim. */
function tokenOfLength(n: number): string {
  let fill = 0;
  for (;;) {
    const t = forge({ payload: claims({ pad: 'x'.repeat(fill) }) });
    if (t.length >= n) {
      if (t.length === n) return t;
      fill--;
      // Base64 grows in 4-character steps; adjust with JSON whitespace.
      for (let ws = 0; ws < 4; ws++) {
        const text = JSON.stringify(claims({ pad: 'x'.repeat(fill) })).slice(0, -1) + ' '.repeat(ws) + '}';
        const c = forge({ payload: text });
        if (c.length === n) return c;
      }
      throw new Error(`cannot reach length ${n}`);
    }
    fill += Math.max(1, Math.floor(((n - t.length) * 3) / 4));
  }
}

type Expect = RejectReason | 'primary' | 'previous';
const cases: [string, () => string, Expect][] = [
  // --- accepted shapes, one per rule ---
  ['valid, primary secret', () => valid, 'primary'],
  ['valid, previous secret', () => forge({ secret: PREVIOUS }), 'previous'],
  ['typ absent', () => forge({ header: without(header(), 'typ') }), 'primary'],
  ['unknown header members are ignored', () => forge({ header: header({ cty: 'x', x5u: 'https://example.com' }) }), 'primary'],
  ['header members in another order', () => forge({ header: { kid: T, alg: 'HS256', typ: 'JWT' } }), 'primary'],
  ['JSON whitespace and CRLF inside header and payload', () => forge({ header: `{"typ":"JWT",\r\n "alg":"HS256",\r\n "kid":"${T}"}`, payload: JSON.stringify(claims(), null, 2) }), 'primary'],
  ['user_id in upper case', () => forge({ payload: claims({ user_id: USER.toUpperCase() }) }), 'primary'],
  ['exp one second ahead', () => forge({ payload: claims({ exp: NOW_S + 1 }) }), 'primary'],
  ['exp exactly MAX_TOKEN_LIFETIME_S ahead', () => forge({ payload: claims({ exp: NOW_S + MAX_LIFETIME_S }) }), 'primary'],
  ['exp written with a fraction of zero is still an integer', () => forge({ payload: JSON.stringify(claims()).replace(/"exp":(\d+)/, '"exp":$1.0') }), 'primary'],
  ['nbf in the future is not validated', () => forge({ payload: claims({ nbf: NOW_S + 3600 }) }), 'primary'],
  ['iat in the future, jti and custom claims are not validated', () => forge({ payload: claims({ iat: NOW_S + 99_999, jti: 'x', role: ['a'], meta: { a: { b: 1 } } }) }), 'primary'],
  ['colons and escaped quotes inside strings are not members', () => forge({ payload: claims({ 'a:b': 'c:"d":e', note: '\\":\\"' }) }), 'primary'],
  ['equal member names in different objects', () => forge({ payload: claims({ x: { exp: 1, iss: 'y' }, y: [{ a: 1 }, { a: 2 }] }) }), 'primary'],
  ['non-ASCII UTF-8 in a custom claim', () => forge({ payload: claims({ name: 'Zoë 🚀 名前' }) }), 'primary'],
  ['a "__proto__" member is an ordinary claim', () => forge({ payload: JSON.stringify(claims()).replace(/^\{/, '{"__proto__":{"iss":"x"},') }), 'primary'],
  ['exactly 8 KiB', () => tokenOfLength(MAX_TOKEN_BYTES), 'primary'],

  // --- size ---
  ['one character over 8 KiB', () => tokenOfLength(MAX_TOKEN_BYTES + 1), 'too_large'],
  ['a megabyte', () => valid + 'A'.repeat(1 << 20), 'too_large'],

  // --- compact shape and base64url ---
  ['empty string', () => '', 'malformed'],
  ['two segments', () => forge({ segments: (p) => p.slice(0, 2) }), 'malformed'],
  ['four segments', () => forge({ segments: (p) => [...p, p[2]!] }), 'malformed'],
  ['JWE-like five segments', () => forge({ segments: (p) => [p[0]!, '', p[1]!, p[2]!, ''] }), 'malformed'],
  ['empty signature (unsecured JWS)', () => forge({ signatureSegment: () => '' }), 'malformed'],
  ['empty header segment', () => forge({ headerSegment: () => '' }), 'malformed'],
  ['padded header (signed as padded)', () => forge({ headerSegment: malform.padded }), 'malformed'],
  ['padded payload (signed as padded)', () => forge({ payloadSegment: malform.padded }), 'malformed'],
  ['padded signature', () => forge({ signatureSegment: malform.padded }), 'malformed'],
  ['leading space', () => ' ' + valid, 'malformed'],
  ['trailing newline', () => valid + '\n', 'malformed'],
  ['space inside the payload (signed with it)', () => forge({ payloadSegment: malform.whitespace('middle') }), 'malformed'],
  ['tab inside the signature', () => forge({ signatureSegment: malform.whitespace('middle', '\t') }), 'malformed'],
  ['non-canonical header (signed as such)', () => forge({ header: jsonFor(header(), 'nonCanonical'), headerSegment: malform.nonCanonical }), 'malformed'],
  ['non-canonical payload (signed as such)', () => forge({ payload: jsonFor(claims(), 'nonCanonical'), payloadSegment: malform.nonCanonical }), 'malformed'],
  ['non-canonical signature (same bytes)', () => forge({ signatureSegment: malform.nonCanonical }), 'malformed'],
  ['standard base64 alphabet in the payload (signed as such)', () => forge({ payload: jsonFor(claims(), 'standardAlphabet'), payloadSegment: malform.standardAlphabet }), 'malformed'],
  ['truncated signature (impossible length)', () => forge({ signatureSegment: (s) => s.slice(0, 41) }), 'malformed'],
  ['invalid UTF-8 in the payload', () => forge({ payloadSegment: () => Buffer.concat([Buffer.from(JSON.stringify(claims()).slice(0, -1) + ',"n":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]).toString('base64url') }), 'malformed'],
  ['header is not JSON', () => forge({ header: 'alg=HS256' }), 'malformed'],
  ['payload is a JSON array', () => forge({ payload: JSON.stringify([claims()]) }), 'malformed'],
  ['payload is JSON null', () => forge({ payload: 'null' }), 'malformed'],
  ['payload is a JSON string', () => forge({ payload: JSON.stringify(JSON.stringify(claims())) }), 'malformed'],
  ['payload JSON with trailing garbage', () => forge({ payload: JSON.stringify(claims()) + 'x' }), 'malformed'],
  ['payload with a byte order mark', () => forge({ payload: '\uFEFF' + JSON.stringify(claims()) }), 'malformed'],

  // --- duplicate member names ---
  ['duplicate alg in the header', () => forge({ header: jsonWithDuplicate(header(), 'alg', 'none') }), 'duplicate_member'],
  ['duplicate kid in the header', () => forge({ header: jsonWithDuplicate(header(), 'kid', D) }), 'duplicate_member'],
  ['duplicate exp in the payload', () => forge({ payload: jsonWithDuplicate(claims(), 'exp', NOW_S - 10) }), 'duplicate_member'],
  ['duplicate tenant_id in the payload', () => forge({ payload: jsonWithDuplicate(claims(), 'tenant_id', D) }), 'duplicate_member'],
  ['duplicate names spelled with escapes', () => forge({ payload: JSON.stringify(claims()).replace(/^\{/, '{"\\u0069ss":"x",') }), 'duplicate_member'],
  ['duplicate member in a nested object', () => forge({ payload: JSON.stringify(claims({ meta: 0 })).replace('"meta":0', '"meta":{"a":1,"a":2}') }), 'duplicate_member'],

  // --- header rules ---
  ['alg none', () => forge({ header: header({ alg: 'none' }) }), 'bad_alg'],
  ['alg HS384', () => forge({ header: header({ alg: 'HS384' }) }), 'bad_alg'],
  ['alg in lower case', () => forge({ header: header({ alg: 'hs256' }) }), 'bad_alg'],
  ['alg RS256', () => forge({ header: header({ alg: 'RS256' }) }), 'bad_alg'],
  ['alg as an array', () => forge({ header: header({ alg: ['HS256'] }) }), 'bad_alg'],
  ['alg missing', () => forge({ header: without(header(), 'alg') }), 'bad_alg'],
  ['kid missing', () => forge({ header: without(header(), 'kid') }), 'bad_header'],
  ['kid a number', () => forge({ header: header({ kid: 1 }) }), 'bad_header'],
  ['kid null', () => forge({ header: header({ kid: null }) }), 'bad_header'],
  ['crit present', () => forge({ header: header({ crit: ['exp'] }) }), 'bad_header'],
  ['crit an empty array', () => forge({ header: header({ crit: [] }) }), 'bad_header'],
  ['typ in lower case', () => forge({ header: header({ typ: 'jwt' }) }), 'bad_header'],
  ['typ JOSE', () => forge({ header: header({ typ: 'JOSE' }) }), 'bad_header'],
  ['typ null', () => forge({ header: header({ typ: null }) }), 'bad_header'],

  // --- claims ---
  ['iss missing', () => forge({ payload: without(claims(), 'iss') }), 'bad_issuer'],
  ['iss another issuer', () => forge({ payload: claims({ iss: 'service-relay2' }) }), 'bad_issuer'],
  ['iss as an array', () => forge({ payload: claims({ iss: ['service-relay'] }) }), 'bad_issuer'],
  ['aud as an array', () => forge({ payload: claims({ aud: ['service-relay'] }) }), 'bad_audience'],
  ['aud in another case', () => forge({ payload: claims({ aud: 'Service-Relay' }) }), 'bad_audience'],
  ['aud missing', () => forge({ payload: without(claims(), 'aud') }), 'bad_audience'],
  ['exp missing', () => forge({ payload: without(claims(), 'exp') }), 'bad_exp'],
  ['exp a string', () => forge({ payload: claims({ exp: String(NOW_S + 60) }) }), 'bad_exp'],
  ['exp a fraction', () => forge({ payload: claims({ exp: NOW_S + 60.5 }) }), 'bad_exp'],
  ['exp beyond safe integers', () => forge({ payload: claims({ exp: 1e20 }) }), 'bad_exp'],
  ['exp equal to now', () => forge({ payload: claims({ exp: NOW_S }) }), 'expired'],
  ['exp one second ago', () => forge({ payload: claims({ exp: NOW_S - 1 }) }), 'expired'],
  ['exp one second past MAX_TOKEN_LIFETIME_S', () => forge({ payload: claims({ exp: NOW_S + MAX_LIFETIME_S + 1 }) }), 'lifetime_too_long'],
  ['tenant_id in upper case (kid too)', () => forge({ header: header({ kid: T.toUpperCase() }), payload: claims({ tenant_id: T.toUpperCase() }) }), 'bad_tenant_id'],
  ['tenant_id missing', () => forge({ payload: without(claims(), 'tenant_id') }), 'bad_tenant_id'],
  ['tenant_id without dashes (kid too)', () => forge({ header: header({ kid: T.replace(/-/g, '') }), payload: claims({ tenant_id: T.replace(/-/g, '') }) }), 'bad_tenant_id'],
  ['tenant_id in braces', () => forge({ header: header({ kid: `{${T}}` }), payload: claims({ tenant_id: `{${T}}` }) }), 'bad_tenant_id'],
  ['user_id missing', () => forge({ payload: without(claims(), 'user_id') }), 'bad_user_id'],
  ['user_id not a UUID', () => forge({ payload: claims({ user_id: 'alice' }) }), 'bad_user_id'],
  ['user_id a number', () => forge({ payload: claims({ user_id: 42 }) }), 'bad_user_id'],
  ['user_id with a trailing newline', () => forge({ payload: claims({ user_id: USER + '\n' }) }), 'bad_user_id'],
  // --- cap (optional, issue #13) ---
  ['cap with prefix and exact patterns', () => forge({ payload: claims({ cap: { 'orders.*': ['subscribe', 'history'], 'chat:lobby': ['publish'] } }) }), 'primary'],
  ['cap empty object (no channel at all)', () => forge({ payload: claims({ cap: {} }) }), 'primary'],
  ['cap of exactly 64 patterns', () => forge({ payload: claims({ cap: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`c${i}`, ['subscribe']])) }) }), 'primary'],
  ['cap null', () => forge({ payload: claims({ cap: null }) }), 'bad_cap'],
  ['cap an array', () => forge({ payload: claims({ cap: [['orders', ['subscribe']]] }) }), 'bad_cap'],
  ['cap a string', () => forge({ payload: claims({ cap: '{"orders":["subscribe"]}' }) }), 'bad_cap'],
  ['cap of 65 patterns', () => forge({ payload: claims({ cap: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`c${i}`, ['subscribe']])) }) }), 'bad_cap'],
  ['cap pattern outside the channel grammar', () => forge({ payload: claims({ cap: { 'orders/x': ['subscribe'] } }) }), 'bad_cap'],
  ['cap pattern a bare *', () => forge({ payload: claims({ cap: { '*': ['subscribe'] } }) }), 'bad_cap'],
  ['cap pattern with * inside', () => forge({ payload: claims({ cap: { 'a*b': ['subscribe'] } }) }), 'bad_cap'],
  ['cap pattern of 129 characters', () => forge({ payload: claims({ cap: { ['a'.repeat(129)]: ['subscribe'] } }) }), 'bad_cap'],
  ['cap pattern empty', () => forge({ payload: claims({ cap: { '': ['subscribe'] } }) }), 'bad_cap'],
  ['cap actions empty', () => forge({ payload: claims({ cap: { orders: [] } }) }), 'bad_cap'],
  ['cap unknown action', () => forge({ payload: claims({ cap: { orders: ['subscribe', 'admin'] } }) }), 'bad_cap'],
  ['cap action in upper case', () => forge({ payload: claims({ cap: { orders: ['SUBSCRIBE'] } }) }), 'bad_cap'],
  ['cap actions a string', () => forge({ payload: claims({ cap: { orders: 'subscribe' } }) }), 'bad_cap'],
  ['kid names another tenant', () => forge({ header: header({ kid: D }) }), 'kid_mismatch'],
  ['kid is the tenant id in upper case', () => forge({ header: header({ kid: T.toUpperCase() }) }), 'kid_mismatch'],

  // --- tenant state ---
  ['unknown tenant', () => forge({ header: header({}, U), payload: claims({}, U) }), 'unknown_tenant'],
  ['disabled tenant, its own valid signature', () => forge({ secret: DISABLED_SECRET, header: header({}, D), payload: claims({}, D) }), 'tenant_disabled'],

  // --- signature ---
  ['signed by another secret', () => forge({ secret: 'x'.repeat(43) }), 'bad_signature'],
  ['signed by another tenant secret', () => forge({ secret: DISABLED_SECRET }), 'bad_signature'],
  ['signed with the secret base64url-decoded instead of its UTF-8 bytes', () => forge({ secret: Buffer.from(PRIMARY, 'base64url') }), 'bad_signature'],
  ['one signature bit flipped', () => forge({ signatureSegment: (s) => (s[0] === 'A' ? 'B' : 'A') + s.slice(1) }), 'bad_signature'],
  ['signature of 31 bytes', () => forge({ signatureSegment: (s) => Buffer.from(s, 'base64url').subarray(0, 31).toString('base64url') }), 'bad_signature'],
  ['signature of 33 bytes', () => forge({ signatureSegment: (s) => Buffer.concat([Buffer.from(s, 'base64url'), Buffer.from([0])]).toString('base64url') }), 'bad_signature'],
  ['HS512 signature under an HS256 header', () => forge({ signatureSegment: () => createHmac('sha512', PRIMARY).update(valid.split('.').slice(0, 2).join('.')).digest('base64url') }), 'bad_signature'],
  ['payload swapped after signing', () => valid.replace(valid.split('.')[1]!, b64url(JSON.stringify(claims({ user_id: '00000000-0000-4000-8000-000000000000' })))), 'bad_signature'],
  // --- a host's user-level revocation (#13): REVOKED's tokens issued before NOW_S ---
  ['revoked user, iat before the moment', () => forge({ payload: revoked({ iat: NOW_S - 1 }) }), 'user_revoked'],
  ['revoked user, no iat', () => forge({ payload: without(revoked({}), 'iat') }), 'user_revoked'],
  ['revoked user, iat not an integer (counts as absent)', () => forge({ payload: revoked({ iat: 'x' }) }), 'user_revoked'],
  ['revoked user, user id in another case', () => forge({ payload: revoked({ iat: NOW_S - 1, user_id: REVOKED.toUpperCase() }) }), 'user_revoked'],
  ['revoked user, previous secret', () => forge({ secret: PREVIOUS, payload: revoked({ iat: NOW_S - 1 }) }), 'user_revoked'],
  ['revoked user, iat at the moment', () => forge({ payload: revoked({ iat: NOW_S }) }), 'primary'],
  ['revoked user, iat after the moment', () => forge({ payload: revoked({ iat: NOW_S + 5 }) }), 'primary'],
  ['a user without revocation, no iat', () => forge({ payload: without(claims(), 'iat') }), 'primary'],
  ['revoked user, bad signature stays bad_signature', () => forge({ secret: 'x'.repeat(43), payload: revoked({ iat: NOW_S - 1 }) }), 'bad_signature'],
];

describe('TokenChecker: every rule of CONTRACT.md "Tokens"', () => {
  const checker = new TokenChecker({ clock: new ManualClock(NOW_S * 1000), maxLifetimeS: MAX_LIFETIME_S });

  it('has at least 60 cases and rejects for every reason of the closed set', () => {
    expect(cases.length).toBeGreaterThanOrEqual(60);
    expect(new Set(cases.map((c) => c[0])).size).toBe(cases.length);
    expect(new Set(cases.map((c) => c[2]))).toEqual(new Set([...REJECT_REASONS, 'primary', 'previous']));
  });

  it.each(cases)('%s', (_name, make, expected) => {
    const result = checker.check(make(), lookup);
    if (expected === 'primary' || expected === 'previous') {
      expect(result).toEqual({
        valid: true,
        identity: expect.objectContaining({ tenantId: T, keySlot: expected, keyVersion: expected === 'primary' ? 2 : 1, expiresAt: expect.any(Number) }),
      });
    } else {
      expect(result).toEqual({ valid: false, reason: expected });
    }
  });

  it('reports identity exactly as signed', () => {
    const token = signToken({ secret: PRIMARY, tenantId: T, userId: USER.toUpperCase(), exp: NOW_S + 30 });
    expect(checker.check(token, lookup)).toEqual({
      valid: true,
      identity: { tenantId: T, userId: USER.toUpperCase(), expiresAt: NOW_S + 30, keySlot: 'primary', keyVersion: 2, issuedAt: expect.any(Number) },
    });
  });

  it('hands the cap claim back in canonical form (patterns sorted, each action once, in a fixed order)', () => {
    const token = signToken({ secret: PRIMARY, tenantId: T, userId: USER, exp: NOW_S + 30, claims: { cap: { 'z.*': ['history', 'subscribe', 'history'], a: ['presence'] } } });
    const result = checker.check(token, lookup);
    expect(result.valid && result.identity.cap).toEqual([
      { pattern: 'a', actions: ['presence'] },
      { pattern: 'z.*', actions: ['subscribe', 'history'] },
    ]);
  });

  it('applies the time rules and the HMAC again to a token it has seen', () => {
    const clock = new ManualClock(NOW_S * 1000);
    const c = new TokenChecker({ clock, maxLifetimeS: MAX_LIFETIME_S });
    const token = forge({ payload: claims({ exp: NOW_S + 60 }) });
    expect(c.check(token, lookup).valid).toBe(true);
    const [h, p, sig] = token.split('.') as [string, string, string];
    expect(c.check(`${h}.${p}.${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`, lookup)).toEqual({ valid: false, reason: 'bad_signature' });
    expect(c.check(token, () => buildTenantKeys(T, { found: true, disabled: false, version: 9, primary: { secret: 'n'.repeat(43), keyVersion: 3 } }))).toEqual({ valid: false, reason: 'bad_signature' });
    clock.advance(60_000);
    expect(c.check(token, lookup)).toEqual({ valid: false, reason: 'expired' });
  });

  it('applies header rules to a header it has already accepted', () => {
    // The accepted-header cache must not carry a verdict over to other bytes.
    expect(checker.check(valid, lookup).valid).toBe(true);
    expect(checker.check(forge({ header: header({ alg: 'none' }) }), lookup)).toEqual({ valid: false, reason: 'bad_alg' });
    expect(checker.check(forge({ payload: claims({ exp: NOW_S - 5 }) }), lookup)).toEqual({ valid: false, reason: 'expired' });
  });
});

describe('canonical base64url', () => {
  it('agrees with decode-then-encode round-tripping on random segments', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/= ';
    const bytes = randomBytes(4000);
    for (let i = 0; i < 1000; i++) {
      const len = 1 + (bytes[i]! % 9);
      let s = '';
      for (let j = 0; j < len; j++) s += alphabet[bytes[(i * 7 + j) % bytes.length]! % (i % 3 === 0 ? alphabet.length : 64)];
      const roundTrips = /^[A-Za-z0-9_-]+$/.test(s) && Buffer.from(s, 'base64url').toString('base64url') === s;
      expect(isCanonicalBase64url(s), s).toBe(roundTrips);
    }
  });
});
