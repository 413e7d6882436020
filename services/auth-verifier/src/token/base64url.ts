// Only the base64url alphabet: standard base64's '+' and '/', padding and
// whitespace all fail here. Buffer.from(.., 'base64url') would skip or accept
// them silently, so the check must happen before decoding. (A regex beats a
// JS loop over char codes by about 2x on V8 for these lengths.)
const ALPHABET = /^[A-Za-z0-9_-]+$/;
const ALPHABET_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const VALUE = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET_CHARS.length; i++) VALUE[ALPHABET_CHARS.charCodeAt(i)] = i;

/**
 * True when `segment` is canonical unpadded base64url: only alphabet
 * characters, a length that encodes whole bytes, and zero bits in the unused
 * low bits of the last character. That last rule is what makes
 * decode-then-encode round-trip, without paying for the re-encoding.
 */
export function isCanonicalBase64url(segment: string): boolean {
  return ALPHABET.test(segment) && canonicalTail(segment, 0, segment.length);
}

/**
 * The length and last-character rules for text[start, end), whose characters
 * are already known to be in the alphabet.
 */
export function canonicalTail(text: string, start: number, end: number): boolean {
  const rem = (end - start) & 3;
  if (rem === 0) return end > start;
  if (rem === 1) return false;
  const last = VALUE[text.charCodeAt(end - 1)]!;
  return rem === 2 ? (last & 0x0f) === 0 : (last & 0x03) === 0;
}
