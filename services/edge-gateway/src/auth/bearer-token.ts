/** The contract caps tokens at 8 KiB; anything longer is refused without asking the verifier. */
export const MAX_TOKEN_BYTES = 8192;

// RFC 7235: the scheme is case-insensitive and followed by one or more spaces;
// the credential is a token68 (no whitespace inside).
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** The bearer token of an Authorization header, or undefined when absent or malformed. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length > MAX_TOKEN_BYTES + 16) return undefined;
  const m = BEARER.exec(header);
  if (!m) return undefined;
  const token = m[1]!;
  return token.length <= MAX_TOKEN_BYTES ? token : undefined;
}
