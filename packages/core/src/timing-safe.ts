import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

// Comparing HMACs of both sides under a per-process random key makes the
// comparison constant-time even when the lengths differ.
const compareKey = randomBytes(32);

export function safeEqual(a: string | Buffer, b: string | Buffer): boolean {
  const ha = createHmac('sha256', compareKey).update(a).digest();
  const hb = createHmac('sha256', compareKey).update(b).digest();
  return timingSafeEqual(ha, hb);
}

/**
 * True when `presented` equals one of `accepted` (a credential and its
 * overlap value during a rotation). Every value is compared, whichever
 * matches, so the answer's timing does not tell which slot matched.
 */
export function safeEqualAny(presented: string | Buffer, accepted: string | readonly string[]): boolean {
  if (typeof accepted === 'string') return safeEqual(presented, accepted);
  let ok = false;
  for (const value of accepted) ok = safeEqual(presented, value) || ok;
  return ok;
}
