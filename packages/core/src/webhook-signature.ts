import { createHmac, randomBytes } from 'node:crypto';
import { safeEqual } from './timing-safe';

/**
 * The Standard Webhooks signing scheme (standardwebhooks.com), one copy for
 * everything service-relay sends to a host: subscribe/publish callbacks
 * (#32 item 4) and webhooks (#32 items 1-3). Headers `webhook-id`,
 * `webhook-timestamp` (unix seconds) and `webhook-signature`
 * (`v1,<base64 HMAC-SHA256 over "${id}.${timestamp}.${body}">`, several
 * space-separated while a secret is rotated). The secret is `whsec_` + the
 * base64 of its key bytes; the HMAC key is those bytes (so the Standard
 * Webhooks libraries verify our requests as they are).
 *
 * The host SDK keeps a vendored verifier (packages/host/src/webhook-verify.ts)
 * run against this signer by its test.
 */
export const SIGNING_SECRET_PREFIX = 'whsec_';
/** How far a request's timestamp may be from the receiver's clock (either way) before it is refused: 5 minutes. */
export const SIGNATURE_TOLERANCE_S = 300;

export type SignatureHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/** A new signing secret: `whsec_` + base64 of 32 random bytes. */
export function newSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBytes(32).toString('base64');
}

/** A well-formed secret: the prefix and base64 of 24..64 bytes. */
export function isSigningSecret(secret: string): boolean {
  if (!secret.startsWith(SIGNING_SECRET_PREFIX)) return false;
  const b64 = secret.slice(SIGNING_SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return false;
  const n = Buffer.from(b64, 'base64').length;
  return n >= 24 && n <= 64;
}

function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SIGNING_SECRET_PREFIX) ? secret.slice(SIGNING_SECRET_PREFIX.length) : secret, 'base64');
}

/** `v1,<base64 signature>` of one message under one secret. */
export function signatureOf(secret: string, id: string, timestampS: number, body: string): string {
  return 'v1,' + createHmac('sha256', keyOf(secret)).update(`${id}.${timestampS}.${body}`).digest('base64');
}

/** The three headers for `body`, signed with every given secret (the current one first; a previous one while it is rotated out). */
export function signedHeaders(secrets: readonly string[], id: string, timestampS: number, body: string): SignatureHeaders {
  if (secrets.length === 0) throw new Error('signedHeaders: no secret');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': secrets.map((s) => signatureOf(s, id, timestampS, body)).join(' '),
  };
}

export type SignatureCheck = { ok: true } | { ok: false; reason: 'missing_headers' | 'bad_timestamp' | 'stale' | 'bad_signature' };

/**
 * Whether `body` with these headers was signed with `secret` within the
 * tolerance of `nowS`. Any one `v1,` signature of the header may match
 * (rotation); the comparison is constant-time.
 */
export function checkSignature(
  body: string,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  secret: string,
  nowS: number,
  toleranceS: number = SIGNATURE_TOLERANCE_S,
): SignatureCheck {
  const id = one(headers['webhook-id']);
  const ts = one(headers['webhook-timestamp']);
  const sigs = one(headers['webhook-signature']);
  if (id === undefined || ts === undefined || sigs === undefined) return { ok: false, reason: 'missing_headers' };
  if (!/^\d{1,12}$/.test(ts)) return { ok: false, reason: 'bad_timestamp' };
  if (Math.abs(nowS - Number(ts)) > toleranceS) return { ok: false, reason: 'stale' };
  const expected = signatureOf(secret, id, Number(ts), body);
  let match = false;
  for (const candidate of sigs.split(' ')) if (candidate.startsWith('v1,') && safeEqual(candidate, expected)) match = true;
  return match ? { ok: true } : { ok: false, reason: 'bad_signature' };
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;
}
