import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_TOKEN_BYTES } from '@service-relay/core';
import { bearerToken } from './authorization';

// Property-based tests of the Authorization bearer parsing (gateway, realtime, registry admin). Seeded so a
// failure reproduces (fast-check prints the seed and the shrunk input).
const config = { seed: 0x6a7e_0001, numRuns: 500 };

const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
const B64URL = fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'), minLength: 1, maxLength: 60 });
const jwtLike = fc.tuple(B64URL, B64URL, B64URL).map((p) => p.join('.'));
const scheme = fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR');
/** Characters that may not appear inside a token68 credential. */
const garbage = fc.constantFrom(' ', '\t', '\n', '\r', '\u0000', '\u00a0', '\u2028', ',', ';', '"', "'", '\\', '(', '<', '%', '\u00e9', '\ud83d\ude80', '\ufeff');

describe('bearerToken (edge toolkit) under arbitrary input', () => {
  it('never throws; what it returns is a token68 credential of at most 8 KiB that the header names exactly', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 120 }), fc.string().map((s) => `Bearer ${s}`), fc.option(fc.string(), { nil: undefined })), (header) => {
        const token = bearerToken(header);
        if (token === undefined) return;
        expect(token).toMatch(TOKEN68);
        expect(token.length).toBeLessThanOrEqual(MAX_TOKEN_BYTES);
        expect(header).toMatch(new RegExp(`^bearer +${token.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')} *$`, 'i'));
      }),
      config,
    );
  });

  it('the scheme in any case, one or more spaces, trailing spaces: the token comes back unchanged', () => {
    fc.assert(
      fc.property(scheme, fc.integer({ min: 1, max: 4 }), fc.integer({ min: 0, max: 3 }), jwtLike, (s, lead, trail, token) => {
        expect(bearerToken(`${s}${' '.repeat(lead)}${token}${' '.repeat(trail)}`)).toBe(token);
      }),
      config,
    );
  });

  it('whitespace or garbage inside or around the token, another scheme, or no space: refused', () => {
    fc.assert(
      fc.property(scheme, jwtLike, garbage, fc.nat(), fc.constantFrom('inside', 'before-scheme', 'scheme-joined', 'other-scheme', 'after'), (s, token, g, at, where) => {
        const i = at % (token.length + 1);
        const header =
          where === 'inside'
            ? `${s} ${token.slice(0, i)}${g}${token.slice(i)}`
            : where === 'before-scheme'
              ? `${g}${s} ${token}`
              : where === 'scheme-joined'
                ? `${s}${token}`
                : where === 'other-scheme'
                  ? `Basic ${token}`
                  : `${s} ${token}${g}x`;
        // A space at the very end of the token is the one harmless case.
        fc.pre(!(where === 'inside' && g === ' ' && (i === 0 || i === token.length)));
        expect(bearerToken(header)).toBeUndefined();
      }),
      config,
    );
  });

  it('two credentials in one header (as a client joining duplicate headers would send) are refused', () => {
    fc.assert(
      fc.property(scheme, jwtLike, jwtLike, fc.constantFrom(', ', ',', ' '), (s, a, b, sep) => {
        expect(bearerToken(`${s} ${a}${sep}${s} ${b}`)).toBeUndefined();
      }),
      config,
    );
  });

  it('tokens over 8 KiB are refused without a regex run over megabytes', () => {
    fc.assert(
      fc.property(fc.integer({ min: MAX_TOKEN_BYTES + 1, max: 1 << 20 }), (n) => {
        expect(bearerToken(`Bearer ${'a'.repeat(n)}`)).toBeUndefined();
      }),
      { ...config, numRuns: 20 },
    );
  });
});
