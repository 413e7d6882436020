import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_BASIC_HEADER_LENGTH, parseBasicAuthorization } from './authorization';

// Property-based tests of the HTTP Basic parsing (the registry's host-sync fetch).
const config = { seed: 0x6a7e_0002, numRuns: 500 };
const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
/** Strings that survive UTF-8 (no lone surrogates). */
const text = (o: { minLength?: number; maxLength?: number }) => fc.string({ unit: 'grapheme', ...o });
const id = text({ minLength: 1, maxLength: 40 }).filter((s) => !s.includes(':'));
const secret = text({ maxLength: 60 });
const garbage = fc.constantFrom(' ', '\t', '\u0000', '-', '_', '.', '!', '*', '"', '\u00e9', '%', '=');

describe('parseBasicAuthorization under arbitrary input', () => {
  it('never throws; what it returns re-encodes to the header it came from', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary', maxLength: 200 }), fc.base64String({ maxLength: 200 }).map((s) => `Basic ${s}`), fc.constant(undefined)), (header) => {
        const creds = parseBasicAuthorization(header);
        if (creds === undefined) return;
        expect(header!.length).toBeLessThanOrEqual(MAX_BASIC_HEADER_LENGTH);
        expect(creds.clientId.length).toBeGreaterThan(0);
        expect(creds.clientId).not.toContain(':');
        const encoded = /^basic +(\S+) *$/i.exec(header!)![1]!;
        expect(b64(`${creds.clientId}:${creds.secret}`).replace(/=+$/, '')).toBe(encoded.replace(/=+$/, ''));
      }),
      config,
    );
  });

  it('any id without a colon and any secret round-trip, scheme in any case, padded or not', () => {
    fc.assert(
      fc.property(id, secret, fc.constantFrom('Basic', 'basic', 'BASIC'), fc.boolean(), (i, s, scheme, unpadded) => {
        const enc = b64(`${i}:${s}`);
        const header = `${scheme} ${unpadded ? enc.replace(/=+$/, '') : enc}`;
        fc.pre(header.length <= MAX_BASIC_HEADER_LENGTH);
        expect(parseBasicAuthorization(header)).toEqual({ clientId: i, secret: s });
      }),
      config,
    );
  });

  it('garbage inside the base64, url-safe alphabet, extra padding or a second credential: refused', () => {
    fc.assert(
      fc.property(id, secret, garbage, fc.nat(), fc.constantFrom('inside', 'pad', 'second'), (i, s, g, at, how) => {
        const enc = b64(`${i}:${s}`);
        const k = at % (enc.length + 1);
        const header = how === 'inside' ? `Basic ${enc.slice(0, k)}${g}${enc.slice(k)}` : how === 'pad' ? `Basic ${enc}===` : `Basic ${enc}, Basic ${enc}`;
        // A space at either end, or '=' at the end of an already padded text, is not garbage inside.
        fc.pre(!(how === 'inside' && (g === ' ' || g === '=') && (k === 0 || k === enc.length)));
        // '=' before more base64, or '-'/'_' (url-safe) that Node would decode: refused as non-canonical either way.
        expect(parseBasicAuthorization(header)).toBeUndefined();
      }),
      config,
    );
  });
});
