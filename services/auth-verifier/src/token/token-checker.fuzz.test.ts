import { createHmac } from 'node:crypto';
import { ManualClock } from '@service-relay/core';
import fc from 'fast-check';
import { jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import type { RejectReason } from './reject-reason';
import { buildTenantKeys, type TenantKeys } from './tenant-keys';
import { TokenChecker, type CheckResult } from './token-checker';

// Property-based tests of the pure token checker: tokens are mutated at the
// character level (not re-signed: nothing but the original may pass) and at
// the JSON level (re-signed: the verdict must equal an independent reference
// implementation of CONTRACT.md "Tokens" written below, and an accepted token
// must also verify with jose). Seeded, so a failure reproduces; fast-check
// prints the seed and the shrunk counterexample.

const SEED = 0x7e1e_c0de;
const RUNS = 400;

const NOW_S = 1_700_000_000;
const MAX_LIFETIME_S = 86_400;
const T = '5b0c5a7e-3f1d-4c2a-9e8b-7a6d5c4b3a21'; // enabled, primary + previous
const D = '0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0'; // disabled
const U = '11111111-2222-4333-8444-555555555555'; // unknown
const USER = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
const PRIMARY = 'q3Z0bW9vc2UtY2FmZV9iYWJlLWRlYWQtYmVlZi0wMTIz';
const PREVIOUS = 'prev-' + 'b'.repeat(38);
const DISABLED_SECRET = 'disa-' + 'c'.repeat(38);
const WRONG = 'x'.repeat(43);

const tenants = new Map<string, TenantKeys>([
  [T, buildTenantKeys(T, { found: true, disabled: false, version: 4, primary: { secret: PRIMARY, keyVersion: 2 }, previous: { secret: PREVIOUS, keyVersion: 1 } })],
  [D, buildTenantKeys(D, { found: true, disabled: true, version: 3, primary: { secret: DISABLED_SECRET, keyVersion: 1 } })],
]);
const lookup = (id: string): TenantKeys => tenants.get(id) ?? { found: false, tenantId: id, version: 0 };
const newChecker = () => new TokenChecker({ clock: new ManualClock(NOW_S * 1000), maxLifetimeS: MAX_LIFETIME_S });

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64url');
const sign = (secret: string, input: string) => createHmac('sha256', Buffer.from(secret, 'utf8')).update(input).digest('base64url');
const VALID_HEADER = `{"alg":"HS256","typ":"JWT","kid":"${T}"}`;
const VALID_PAYLOAD = `{"iss":"service-relay","aud":"service-relay","exp":${NOW_S + 600},"iat":${NOW_S},"tenant_id":"${T}","user_id":"${USER}"}`;
const VALID = `${b64(VALID_HEADER)}.${b64(VALID_PAYLOAD)}`;
const VALID_TOKEN = `${VALID}.${sign(PRIMARY, VALID)}`;

// ---------------------------------------------------------------------------
// The reference: CONTRACT.md "Tokens" and ARCHITECTURE.md's rule order, written
// without any code of the checker (its own strict JSON reader, its own
// duplicate detection, its own base64url rule).
// ---------------------------------------------------------------------------

class JsonError extends Error {}

/** A strict JSON reader (RFC 8259, like JSON.parse) that also reports repeated member names at any depth. */
function readJson(text: string): { value: unknown; duplicate: boolean } {
  let i = 0;
  let duplicate = false;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const fail = (): never => {
    throw new JsonError(`at ${i}`);
  };
  const str = (): string => {
    if (text[i] !== '"') fail();
    i++;
    let out = '';
    for (;;) {
      if (i >= text.length) fail();
      const c = text[i]!;
      if (c === '"') {
        i++;
        return out;
      }
      if (c.charCodeAt(0) < 0x20) fail();
      if (c === '\\') {
        const e = text[i + 1];
        const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
        if (e !== undefined && e in simple) {
          out += simple[e];
          i += 2;
        } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) {
          out += String.fromCharCode(parseInt(text.slice(i + 2, i + 6), 16));
          i += 6;
        } else fail();
      } else {
        out += c;
        i++;
      }
    }
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const obj: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
      const seen = new Set<string>();
      ws();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        const k = str();
        if (seen.has(k)) duplicate = true;
        seen.add(k);
        ws();
        if (text[i] !== ':') fail();
        i++;
        obj[k] = value();
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail();
      }
    }
    if (c === '[') {
      i++;
      const arr: unknown[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail();
      }
    }
    if (c === '"') return str();
    for (const [lit, v] of [['true', true], ['false', false], ['null', null]] as const) {
      if (text.startsWith(lit, i)) {
        i += lit.length;
        return v;
      }
    }
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m || m[0] === '') fail();
    i += m![0].length;
    return Number(m![0]);
  };
  const v = value();
  ws();
  if (i !== text.length) fail();
  return { value: v, duplicate };
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const LOWER_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ANY_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function canonical(seg: string): boolean {
  return seg.length > 0 && /^[A-Za-z0-9_-]+$/.test(seg) && Buffer.from(seg, 'base64url').toString('base64url') === seg;
}

type Segment = { ok: true; obj: Record<string, unknown> } | { ok: false; reason: RejectReason };

function segment(seg: string): Segment {
  let text: string;
  try {
    text = UTF8.decode(Buffer.from(seg, 'base64url'));
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  let parsed: { value: unknown; duplicate: boolean };
  try {
    parsed = readJson(text);
  } catch (e) {
    if (e instanceof JsonError) return { ok: false, reason: 'malformed' };
    throw e;
  }
  const v = parsed.value;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: false, reason: 'malformed' };
  if (parsed.duplicate) return { ok: false, reason: 'duplicate_member' };
  return { ok: true, obj: v as Record<string, unknown> };
}

function reference(token: string): CheckResult {
  const no = (reason: RejectReason): CheckResult => ({ valid: false, reason });
  if (token.length > 8192) return no('too_large');
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every(canonical)) return no('malformed');
  const [h, p, s] = parts as [string, string, string];
  const header = segment(h);
  if (!header.ok) return no(header.reason);
  const payload = segment(p);
  if (!payload.ok) return no(payload.reason);
  const hd = header.obj;
  const cl = payload.obj;
  if (hd.alg !== 'HS256') return no('bad_alg');
  if (typeof hd.kid !== 'string' || 'crit' in hd) return no('bad_header');
  if ('typ' in hd && hd.typ !== 'JWT') return no('bad_header');
  if (cl.iss !== 'service-relay') return no('bad_issuer');
  if (cl.aud !== 'service-relay') return no('bad_audience');
  const exp = cl.exp;
  if (typeof exp !== 'number' || !Number.isInteger(exp) || Math.abs(exp) > Number.MAX_SAFE_INTEGER) return no('bad_exp');
  if (typeof cl.tenant_id !== 'string' || !LOWER_UUID.test(cl.tenant_id)) return no('bad_tenant_id');
  if (typeof cl.user_id !== 'string' || !ANY_UUID.test(cl.user_id)) return no('bad_user_id');
  if (hd.kid !== cl.tenant_id) return no('kid_mismatch');
  if (exp <= NOW_S) return no('expired');
  if (exp - NOW_S > MAX_LIFETIME_S) return no('lifetime_too_long');
  const tenantId = cl.tenant_id;
  const secrets: Record<string, Array<[string, 'primary' | 'previous', number]>> = {
    [T]: [
      [PRIMARY, 'primary', 2],
      [PREVIOUS, 'previous', 1],
    ],
    [D]: [[DISABLED_SECRET, 'primary', 1]],
  };
  if (!(tenantId in secrets)) return no('unknown_tenant');
  if (tenantId === D) return no('tenant_disabled');
  for (const [secret, keySlot, keyVersion] of secrets[tenantId]!) {
    if (sign(secret, `${h}.${p}`) === s) {
      // An integer `iat` is reported (realtime closes by it on a user revocation, #13); anything else is as if absent.
      const iat = typeof cl.iat === 'number' && Number.isSafeInteger(cl.iat) ? { issuedAt: cl.iat } : {};
      return { valid: true, identity: { tenantId, userId: cl.user_id, expiresAt: exp, keySlot, keyVersion, ...iat } };
    }
  }
  return no('bad_signature');
}

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

/** One JSON member: a name and the raw JSON text of its value. */
type Member = [name: string, raw: string];

const q = (s: string) => JSON.stringify(s);
const headerValues: Record<string, string[]> = {
  alg: [q('HS256'), q('hs256'), q('none'), q('HS384'), q('RS256'), '["HS256"]', 'null', q('HS256 '), '"HS\\u0032\\u0035\\u0036"', '{"x":1}'],
  kid: [q(T), q(T.toUpperCase()), q(D), q(U), '1', 'null', q(`${T}\n`), q('')],
  typ: [q('JWT'), q('jwt'), q('JOSE'), 'null', '"J\\u0057T"', q('JWT ')],
  crit: ['[]', '["exp"]', 'null'],
  cty: [q('x'), '{"alg":"none"}'],
  __proto__: ['{"alg":"none"}', 'null'],
};
const payloadValues: Record<string, string[]> = {
  iss: [q('service-relay'), q('Service-Relay'), '["service-relay"]', 'null', q('service-relay2'), '"service\\u002drelay"'],
  aud: [q('service-relay'), '["service-relay"]', q(''), 'null', q('service-relay ')],
  exp: [
    String(NOW_S + 600),
    String(NOW_S),
    String(NOW_S - 1),
    String(NOW_S + 1),
    String(NOW_S + MAX_LIFETIME_S),
    String(NOW_S + MAX_LIFETIME_S + 1),
    `${NOW_S + 600}.0`,
    `${NOW_S + 600}.5`,
    `${(NOW_S + 600) / 10}e1`,
    '1.7000006E9',
    '1e20',
    '1e400',
    '-0',
    '-1',
    q(String(NOW_S + 600)),
    'null',
    'true',
    String(Number.MAX_SAFE_INTEGER),
    String(Number.MAX_SAFE_INTEGER + 2),
  ],
  tenant_id: [q(T), q(T.toUpperCase()), q(D), q(U), q(T.replace(/-/g, '')), q(`{${T}}`), q(`${T}\n`), '1', 'null'],
  user_id: [q(USER), q(USER.toUpperCase()), q('alice'), '42', q(`${USER}\n`), q(` ${USER}`), 'null'],
  nbf: [String(NOW_S + 3600), q('soon')],
  iat: [String(NOW_S + 99_999), q('x')],
  jti: [q('j'), '{"a":1,"a":2}'],
  meta: ['{"a":{"b":1}}', '{"a":1,"a":2}', '[{"a":1},{"a":2}]', '{"exp":1,"iss":"x"}', '"a:b\\":\\"c"', '{"\\u0061":1,"a":2}'],
  __proto__: ['{"iss":"x"}', 'null'],
};

type Op = { kind: 'set'; name: string; raw: string } | { kind: 'dup'; name: string; raw: string } | { kind: 'del'; name: string } | { kind: 'swap'; i: number; j: number };

function opArb(values: Record<string, string[]>): fc.Arbitrary<Op> {
  const names = Object.keys(values);
  const nameValue = fc.constantFrom(...names).chain((name) => fc.constantFrom(...values[name]!).map((raw) => ({ name, raw })));
  return fc.oneof(
    nameValue.map(({ name, raw }) => ({ kind: 'set' as const, name, raw })),
    nameValue.map(({ name, raw }) => ({ kind: 'dup' as const, name, raw })),
    fc.constantFrom(...names).map((name) => ({ kind: 'del' as const, name })),
    fc.record({ kind: fc.constant('swap' as const), i: fc.nat(8), j: fc.nat(8) }),
  );
}

function apply(base: Member[], ops: Op[]): Member[] {
  const m = base.map((x) => [...x] as Member);
  for (const op of ops) {
    if (op.kind === 'set') {
      const at = m.findIndex(([n]) => n === op.name);
      if (at >= 0) m[at] = [op.name, op.raw];
      else m.push([op.name, op.raw]);
    } else if (op.kind === 'dup') {
      m.splice(Math.min(m.length, 1), 0, [op.name, op.raw]);
    } else if (op.kind === 'del') {
      const at = m.findIndex(([n]) => n === op.name);
      if (at >= 0) m.splice(at, 1);
    } else if (m.length > 1) {
      const i = op.i % m.length;
      const j = op.j % m.length;
      [m[i], m[j]] = [m[j]!, m[i]!];
    }
  }
  return m;
}

/** How a member name is written: plain, or one character as a \u escape (the same name to a JSON reader). */
function writeName(name: string, escapeAt: number | undefined): string {
  if (escapeAt === undefined || name.length === 0) return q(name);
  const at = escapeAt % name.length;
  const code = name.charCodeAt(at).toString(16).padStart(4, '0');
  return `"${name.slice(0, at)}\\u${code}${name.slice(at + 1)}"`;
}

const layout = fc.record({
  ws: fc.constantFrom('', ' ', '\n', '\r\n ', '\t'),
  escape: fc.option(fc.nat(20), { nil: undefined }),
});

function writeObject(members: Member[], l: { ws: string; escape: number | undefined }): string {
  return `{${l.ws}${members.map(([n, raw], i) => `${writeName(n, i === 0 ? l.escape : undefined)}${l.ws}:${raw}`).join(`,${l.ws}`)}${l.ws}}`;
}

const HEADER_BASE: Member[] = [
  ['alg', q('HS256')],
  ['typ', q('JWT')],
  ['kid', q(T)],
];
const PAYLOAD_BASE: Member[] = [
  ['iss', q('service-relay')],
  ['aud', q('service-relay')],
  ['exp', String(NOW_S + 600)],
  ['tenant_id', q(T)],
  ['user_id', q(USER)],
];

const resigned = fc
  .record({
    headerOps: fc.array(opArb(headerValues), { maxLength: 3 }),
    payloadOps: fc.array(opArb(payloadValues), { maxLength: 3 }),
    headerLayout: layout,
    payloadLayout: layout,
    secret: fc.constantFrom(PRIMARY, PRIMARY, PRIMARY, PREVIOUS, DISABLED_SECRET, WRONG),
  })
  .map((r) => {
    const header = apply(HEADER_BASE, r.headerOps);
    const payload = apply(PAYLOAD_BASE, r.payloadOps);
    const input = `${b64(writeObject(header, r.headerLayout))}.${b64(writeObject(payload, r.payloadLayout))}`;
    return { token: `${input}.${sign(r.secret, input)}`, secret: r.secret, names: payload.map(([n]) => n) };
  });

const CHARS = ['A', 'a', 'Z', '0', '9', '-', '_', '+', '/', '=', '.', ' ', '\t', '\n', '%', '\u00e9', '\u0000', '\ud83d\ude80', 'I', 'Q', 'w', 'g'];
type CharEdit = { kind: 'flip' | 'insert'; at: number; ch: string } | { kind: 'delete'; at: number };
const charEdit: fc.Arbitrary<CharEdit> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), ch: fc.constantFrom(...CHARS) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), ch: fc.constantFrom(...CHARS) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
);

function edit(s: string, edits: CharEdit[]): string {
  let out = s;
  for (const e of edits) {
    const at = e.at % (out.length + 1);
    if (e.kind === 'insert') out = out.slice(0, at) + e.ch + out.slice(at);
    else if (out.length > 0) {
      const i = at % out.length;
      out = out.slice(0, i) + (e.kind === 'flip' ? e.ch : '') + out.slice(i + 1);
    }
  }
  return out;
}

const config = { seed: SEED, numRuns: RUNS };

describe('TokenChecker under mutation (fast-check)', () => {
  it('the reference agrees with the checker on the known-good token', () => {
    expect(reference(VALID_TOKEN)).toEqual(newChecker().check(VALID_TOKEN, lookup));
    expect(reference(VALID_TOKEN).valid).toBe(true);
  });

  it('a valid token with characters flipped, inserted or deleted (not re-signed) is never accepted', () => {
    const checker = newChecker();
    fc.assert(
      fc.property(fc.array(charEdit, { minLength: 1, maxLength: 4 }), (edits) => {
        const token = edit(VALID_TOKEN, edits);
        fc.pre(token !== VALID_TOKEN);
        const verdict = checker.check(token, lookup);
        expect(verdict.valid).toBe(false);
      }),
      config,
    );
  });

  it('segments mutated and then re-signed with the right key: the verdict equals the reference', () => {
    const checker = newChecker();
    fc.assert(
      fc.property(fc.constantFrom(0, 1), fc.array(charEdit, { minLength: 1, maxLength: 3 }), (which, edits) => {
        const parts = VALID.split('.');
        parts[which] = edit(parts[which]!, edits).replace(/\./g, '');
        const input = parts.join('.');
        const token = `${input}.${sign(PRIMARY, input)}`;
        expect(checker.check(token, lookup)).toEqual(reference(token));
      }),
      config,
    );
  });

  it('header and claims mutated (values, duplicates, escapes, order, whitespace), then signed: the verdict equals the reference, also from the header cache', () => {
    const checker = newChecker();
    fc.assert(
      fc.property(resigned, ({ token }) => {
        const want = reference(token);
        expect(checker.check(token, lookup)).toEqual(want);
        // Again: an accepted header is now served from the checker's cache.
        expect(checker.check(token, lookup)).toEqual(want);
      }),
      config,
    );
  });

  it('every accepted re-signed token without nbf/iat also verifies with jose (an ordinary JWT library)', async () => {
    const checker = newChecker();
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(resigned, async ({ token, secret, names }) => {
        const verdict = checker.check(token, lookup);
        if (!verdict.valid || names.includes('nbf') || names.includes('iat')) return;
        accepted++;
        await expect(
          jwtVerify(token, new TextEncoder().encode(secret), { algorithms: ['HS256'], issuer: 'service-relay', audience: 'service-relay', currentDate: new Date(NOW_S * 1000) }),
        ).resolves.toBeDefined();
      }),
      { ...config, numRuns: 300 },
    );
    expect(accepted).toBeGreaterThan(10);
  });

  it('arbitrary strings never throw and are never accepted', () => {
    const checker = newChecker();
    const dotted = fc.array(fc.string({ unit: 'binary', maxLength: 60 }), { minLength: 1, maxLength: 5 }).map((p) => p.join('.'));
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 200 }), dotted, fc.base64String({ maxLength: 300 })), (s) => {
        const verdict = checker.check(s, lookup);
        expect(verdict.valid).toBe(false);
        expect(verdict).toEqual(reference(s));
      }),
      config,
    );
  });
});
