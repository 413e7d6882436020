import { MAX_TOKEN_BYTES } from '@service-relay/core';

export interface DecodedToken {
  /** Compact JSON of the header, or '' when it does not decode to a JSON object. */
  headerJson: string;
  /** Compact JSON of the payload (the claims), or '' likewise. */
  claimsJson: string;
}

/**
 * The header and payload of a token as an operator reads them. Display only:
 * lenient (padding and stray whitespace tolerated, so a malformed token still
 * shows what it says); the verdict comes from TokenChecker alone. The
 * signature segment is never decoded or returned.
 */
export function decodeForDisplay(token: string): DecodedToken {
  // Twice the verifier's limit: enough to show a too_large token, bounded for any input.
  if (token.length > 2 * MAX_TOKEN_BYTES) return { headerJson: '', claimsJson: '' };
  const [header = '', payload = ''] = token.trim().split('.');
  return { headerJson: segmentJson(header), claimsJson: segmentJson(payload) };
}

function segmentJson(segment: string): string {
  if (!/^[A-Za-z0-9_-]+={0,2}$/.test(segment)) return '';
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? JSON.stringify(value) : '';
  } catch {
    return '';
  }
}
