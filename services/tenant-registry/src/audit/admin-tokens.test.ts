import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { AdminTokens, tokenFingerprint } from './admin-tokens';

const current = randomBytes(32).toString('base64url');
const next = randomBytes(32).toString('base64url');

describe('AdminTokens', () => {
  it('names the caller by slot and fingerprint, never by the token', () => {
    const tokens = new AdminTokens(current, next);
    const fp = (t: string) => createHash('sha256').update(t).digest('hex').slice(0, 8);
    expect(tokens.identify(current)).toBe(`current:${fp(current)}`);
    expect(tokens.identify(next)).toBe(`next:${fp(next)}`);
    expect(tokens.actors).toEqual([`current:${fp(current)}`, `next:${fp(next)}`]);
    expect(tokenFingerprint(current)).toMatch(/^[0-9a-f]{8}$/);
    for (const actor of tokens.actors) expect(current.includes(actor.split(':')[1]!) || next.includes(actor.split(':')[1]!)).toBe(false);
  });

  it('refuses anything else, with or without a next token', () => {
    for (const tokens of [new AdminTokens(current, next), new AdminTokens(current)]) {
      for (const presented of [undefined, '', `${current}x`, current.slice(0, -1), current.toUpperCase(), `${next}x`, 'x'.repeat(43)]) {
        expect(tokens.identify(presented), String(presented)).toBeUndefined();
      }
    }
    expect(new AdminTokens(current).identify(next)).toBeUndefined();
    expect(new AdminTokens(current).actors).toHaveLength(1);
  });

  it('calls a token set as both current and next "current"', () => {
    expect(new AdminTokens(current, current).identify(current)).toBe(`current:${tokenFingerprint(current)}`);
  });
});
