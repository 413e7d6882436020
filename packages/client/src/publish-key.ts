/**
 * A fresh idempotency key for a publish (`^[A-Za-z0-9_.:-]{1,128}$`): 128
 * random bits. getRandomValues exists in every browser (also on plain http
 * pages, where randomUUID does not) and in Node 20.
 */
export function newIdempotencyKey(): string {
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  let hex = '';
  for (const b of bytes) hex += b.toString(16).padStart(2, '0');
  return `sdk-${hex}`;
}
