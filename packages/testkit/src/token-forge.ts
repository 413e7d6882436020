import { createHmac } from 'node:crypto';

/**
 * Builds service-relay user tokens for tests: valid ones (signToken) and every
 * malformed shape the verifier must refuse (forgeToken with transforms). The
 * signature is computed over the segments exactly as emitted, so a hostile
 * token's only defect is the one asked for.
 */

export const TOKEN_ISSUER = 'service-relay';
export const TOKEN_AUDIENCE = 'service-relay';

export type Json = Record<string, unknown>;

export interface SignTokenOptions {
  /** The tenant's secret exactly as fetched; the HMAC key is its UTF-8 bytes. */
  secret: string;
  tenantId: string;
  userId: string;
  /** Seconds from `now` to exp (default 300). Ignored when `exp` is given. */
  expiresIn?: number;
  exp?: number;
  /** Milliseconds since the epoch (default Date.now()). */
  now?: number;
  /** Extra or replacing header members / claims. */
  header?: Json;
  claims?: Json;
}

export function tokenHeader(tenantId: string): Json {
  return { alg: 'HS256', typ: 'JWT', kid: tenantId };
}

export function tokenClaims(o: { tenantId: string; userId: string; exp?: number; expiresIn?: number; now?: number }): Json {
  const nowS = Math.floor((o.now ?? Date.now()) / 1000);
  return {
    iss: TOKEN_ISSUER,
    aud: TOKEN_AUDIENCE,
    exp: o.exp ?? nowS + (o.expiresIn ?? 300),
    iat: nowS,
    tenant_id: o.tenantId,
    user_id: o.userId,
  };
}

/** A valid token (the happy path). */
export function signToken(o: SignTokenOptions): string {
  return forgeToken({
    secret: o.secret,
    header: { ...tokenHeader(o.tenantId), ...o.header },
    payload: { ...tokenClaims(o), ...o.claims },
  });
}

/** A transform of one encoded segment, applied before signing. */
export type SegmentTransform = (segment: string) => string;

export interface ForgeOptions {
  /** HMAC key: a string is used as its UTF-8 bytes. */
  secret: string | Uint8Array;
  /** An object is JSON.stringify'd; a string is used as the raw JSON text. */
  header: Json | string;
  payload: Json | string;
  headerSegment?: SegmentTransform;
  payloadSegment?: SegmentTransform;
  /** Transform of the signature segment (after signing). */
  signatureSegment?: SegmentTransform;
  /** Final reshaping of the segment list (extra, missing, reordered segments). */
  segments?: (parts: string[]) => string[];
}

export function forgeToken(o: ForgeOptions): string {
  const h = (o.headerSegment ?? identity)(b64url(text(o.header)));
  const p = (o.payloadSegment ?? identity)(b64url(text(o.payload)));
  const sig = (o.signatureSegment ?? identity)(hs256(o.secret, `${h}.${p}`));
  return (o.segments ?? identity)([h, p, sig]).join('.');
}

/** base64url(HMAC-SHA256(secret, signingInput)). */
export function hs256(secret: string | Uint8Array, signingInput: string): string {
  const key = typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret;
  return createHmac('sha256', key).update(signingInput, 'utf8').digest('base64url');
}

export function b64url(data: string | Uint8Array): string {
  return Buffer.from(data as string).toString('base64url');
}

/** Raw JSON text naming `key` twice: first with `first`, then as in `obj`. */
export function jsonWithDuplicate(obj: Json, key: string, first: unknown): string {
  const body = JSON.stringify(obj).slice(1);
  return `{${JSON.stringify(key)}:${JSON.stringify(first)},${body}`;
}

/** Segment transforms: each yields a shape a strict verifier must refuse. */
export const malform = {
  /** Standard base64 padding ('='), as if the encoder forgot the url variant's rule. */
  padded: ((s) => s + '='.repeat((4 - (s.length % 4)) % 4 || 2)) as SegmentTransform,
  /** A space, tab or newline somewhere in the segment. */
  whitespace:
    (where: 'start' | 'middle' | 'end', ch = ' '): SegmentTransform =>
    (s) =>
      where === 'start' ? ch + s : where === 'end' ? s + ch : s.slice(0, s.length >> 1) + ch + s.slice(s.length >> 1),
  /**
   * Same bytes, other text: sets unused low bits of the last character, which
   * lenient decoders ignore. Needs a length that is not a multiple of 4.
   */
  nonCanonical: ((s) => {
    const rem = s.length % 4;
    if (rem !== 2 && rem !== 3) throw new Error('nonCanonical needs a segment length of 2 or 3 mod 4');
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const v = alphabet.indexOf(s[s.length - 1]!);
    return s.slice(0, -1) + alphabet[v | 1]!;
  }) as SegmentTransform,
  /** '-' and '_' written as standard base64 '+' and '/'. Needs one of them present. */
  standardAlphabet: ((s) => {
    if (!/[-_]/.test(s)) throw new Error('standardAlphabet needs a segment with - or _');
    return s.replace(/-/g, '+').replace(/_/g, '/');
  }) as SegmentTransform,
  /** The last character dropped (a length of 1 mod 4 can never be base64). */
  truncated: ((s) => s.slice(0, -1)) as SegmentTransform,
};

/**
 * JSON text of `obj` with filler so its base64url has the properties a
 * transform needs: `nonCanonical` (length not a multiple of 4) and
 * `standardAlphabet` (contains '-' or '_'). The filler is a member named "~",
 * which no rule reads.
 */
export function jsonFor(obj: Json, need: 'nonCanonical' | 'standardAlphabet'): string {
  const plain = JSON.stringify(obj);
  if (need === 'standardAlphabet') {
    // Six '~' (0x7e) bytes always hold one 3-byte group aligned to the
    // encoding, and 7e7e7e encodes as "fn5-".
    return `{"~":"~~~~~~",${plain.slice(1)}`;
  }
  for (let pad = 0; pad < 3; pad++) {
    const candidate = plain.slice(0, -1) + ' '.repeat(pad) + '}';
    if (b64url(candidate).length % 4 !== 0) return candidate;
  }
  throw new Error('unreachable: one of three lengths is not a multiple of 3');
}

function text(v: Json | string): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function identity<T>(v: T): T {
  return v;
}
