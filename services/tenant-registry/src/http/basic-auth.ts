import type { BasicCredentials } from '../tenants/host-sync-check';

/**
 * Longest Authorization header we parse. Real credentials are about 120
 * characters; anything longer is refused like any other malformed header.
 */
export const MAX_BASIC_HEADER_LENGTH = 1024;

const BASIC = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i;

/** `Basic base64(id:secret)` → credentials, or undefined for anything else. */
export function parseBasicAuthorization(header: string | undefined): BasicCredentials | undefined {
  if (header === undefined || header.length > MAX_BASIC_HEADER_LENGTH) return undefined;
  const m = BASIC.exec(header);
  if (!m) return undefined;
  const encoded = m[1]!;
  const decoded = Buffer.from(encoded, 'base64');
  // Buffer.from ignores junk it cannot decode; insist the text was exactly base64.
  if (decoded.toString('base64').replace(/=+$/, '') !== encoded.replace(/=+$/, '')) return undefined;
  const text = decoded.toString('utf8');
  const colon = text.indexOf(':');
  if (colon <= 0) return undefined;
  return { clientId: text.slice(0, colon), secret: text.slice(colon + 1) };
}
