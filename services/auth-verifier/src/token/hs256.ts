import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

/** The HMAC key of a tenant secret: the UTF-8 bytes of the string exactly as fetched. */
export function secretKeyObject(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret, 'utf8'));
}

/**
 * The signature layer alone: HMAC-SHA256 of the JWS signing input compared in
 * constant time with the raw signature bytes. `signature` must already be the
 * decoded bytes; a length other than 32 can never match.
 */
export function hs256Matches(signingInput: string, signature: Buffer, key: KeyObject | Buffer): boolean {
  if (signature.length !== 32) return false;
  const mac = createHmac('sha256', key).update(signingInput, 'latin1').digest();
  return timingSafeEqual(mac, signature);
}
