import type { IncomingMessage } from 'node:http';
import { MAX_TOKEN_BYTES } from '@service-relay/core';

/**
 * Longest Basic Authorization header we parse. Real host-sync credentials are
 * about 120 characters; anything longer is refused like any other malformed header.
 */
export const MAX_BASIC_HEADER_LENGTH = 1024;

/** What a `Basic` header carries: the part before the first colon, and the rest. */
export interface BasicCredentials {
  clientId: string;
  secret: string;
}

// One grammar for every scheme (RFC 7235): the scheme in any case, one or more
// spaces, one credential with no whitespace, comma or control character inside,
// optional trailing spaces. So two credentials joined in one header
// (`Bearer a, Bearer b`), tabs and quoted values are refused alike.
const grammar = (scheme: string, credential: string) => new RegExp(`^${scheme} +(${credential}) *$`, 'i');
/** The credential is a token68. */
const BEARER = grammar('bearer', '[A-Za-z0-9\\-._~+/]+=*');
/** The credential is standard base64 (padding optional). */
const BASIC = grammar('basic', '[A-Za-z0-9+/]+={0,2}');

/**
 * The request's Authorization value, undefined when it has none. Node keeps
 * only the first of repeated Authorization fields; here they are joined as
 * RFC 9110 combines fields (`a, b`), which no scheme's grammar accepts, so a
 * request with two is refused the same way in every service.
 *
 * Counted on rawHeaders rather than read from `headersDistinct`: that getter
 * builds an object of every field on each call, a few µs on every
 * authenticated request through the gateway (bench/README.md "An earlier Intel Xeon table").
 */
export function authorizationOf(req: Pick<IncomingMessage, 'rawHeaders' | 'headers'>): string | undefined {
  const first = req.headers.authorization;
  if (first === undefined) return undefined;
  const raw = req.rawHeaders;
  // Made only when a second field appears: one field is the common case.
  let all: string[] | undefined;
  let seen = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== 13 || name.toLowerCase() !== 'authorization' || seen++ === 0) continue;
    (all ??= [first]).push(raw[i + 1]!);
  }
  return all ? all.join(', ') : first;
}

/** The bearer token of an Authorization value (at most 8 KiB), or undefined when absent or malformed. */
export function bearerToken(header: string | undefined): string | undefined {
  // No regex run over megabytes: a header this long cannot hold an acceptable token.
  if (header === undefined || header.length > MAX_TOKEN_BYTES + 16) return undefined;
  const token = BEARER.exec(header)?.[1];
  return token !== undefined && token.length <= MAX_TOKEN_BYTES ? token : undefined;
}

/** `Basic base64(id:secret)` → credentials, or undefined for anything else. */
export function parseBasicAuthorization(header: string | undefined): BasicCredentials | undefined {
  if (header === undefined || header.length > MAX_BASIC_HEADER_LENGTH) return undefined;
  const encoded = BASIC.exec(header)?.[1];
  if (encoded === undefined) return undefined;
  const decoded = Buffer.from(encoded, 'base64');
  // Buffer.from ignores junk it cannot decode; insist the text was exactly base64.
  if (decoded.toString('base64').replace(/=+$/, '') !== encoded.replace(/=+$/, '')) return undefined;
  const text = decoded.toString('utf8');
  const colon = text.indexOf(':');
  if (colon <= 0) return undefined;
  return { clientId: text.slice(0, colon), secret: text.slice(colon + 1) };
}
