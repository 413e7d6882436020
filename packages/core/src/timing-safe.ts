import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

// Comparing HMACs of both sides under a per-process random key makes the
// comparison constant-time even when the lengths differ.
const compareKey = randomBytes(32);

export function safeEqual(a: string | Buffer, b: string | Buffer): boolean {
  const ha = createHmac('sha256', compareKey).update(a).digest();
  const hb = createHmac('sha256', compareKey).update(b).digest();
  return timingSafeEqual(ha, hb);
}
