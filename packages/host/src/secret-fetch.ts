import { HostClientError } from './host-client-error.js';

/** The contract's fixed issuer and audience. */
export const RELAY_ISSUER = 'service-relay';

/** What a successful host-sync fetch gives the host. */
export interface FetchedSecret {
  /** The tenant's primary signing secret; the HMAC key is its UTF-8 bytes. */
  secret: string;
  /** The answer's ETag when the server sends one (an opaque version of the primary key). */
  etag: string | undefined;
}

export interface SecretFetchOptions {
  baseUrl: string;
  tenantId: string;
  clientId: string;
  clientSecret: string;
  timeoutMs: number;
  fetch: typeof fetch;
}

// At least 256 bits in base64url (CONTRACT.md "Tokens").
const MIN_SECRET_LENGTH = 43;

/** POST {baseUrl}/api/host/tenants/{tenant}/jwt_secret/fetch with HTTP Basic; every failure is a HostClientError. */
export async function fetchSigningSecret(o: SecretFetchOptions): Promise<FetchedSecret> {
  const url = `${o.baseUrl.replace(/\/+$/, '')}/api/host/tenants/${encodeURIComponent(o.tenantId)}/jwt_secret/fetch`;
  const authorization = basicAuth(o.clientId, o.clientSecret);
  let res: Response;
  let text: string;
  try {
    res = await o.fetch(url, { method: 'POST', headers: { authorization, accept: 'application/json' }, signal: AbortSignal.timeout(o.timeoutMs) });
    text = await res.text();
  } catch (err) {
    // The cause is a network or abort error; neither carries the credentials.
    const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
    throw new HostClientError('unavailable', timedOut ? `secret fetch timed out after ${o.timeoutMs} ms` : 'secret fetch failed: service-relay unreachable', { cause: err });
  }
  if (res.status === 401) throw new HostClientError('invalid_credentials', 'secret fetch refused: invalid host-sync credentials (wrong tenant id, client id or secret, or the tenant is disabled)', { status: 401 });
  if (res.status === 429) {
    const retryAfterS = parseRetryAfter(res.headers.get('retry-after'));
    throw new HostClientError('rate_limited', `secret fetch rate limited: retry after ${retryAfterS} s`, { status: 429, retryAfterS });
  }
  if (res.status >= 500) throw new HostClientError('unavailable', `secret fetch failed: service-relay answered ${res.status}`, { status: res.status });
  if (res.status !== 200) throw new HostClientError('invalid_response', `secret fetch: unexpected status ${res.status}`, { status: res.status });
  const secret = parseBody(text, o.tenantId);
  if (secret === undefined) throw new HostClientError('invalid_response', 'secret fetch: the answer is not the contract shape', { status: 200 });
  return { secret, etag: res.headers.get('etag') ?? undefined };
}

/** `Basic base64(utf8(id:secret))` without Node's Buffer (the package runs wherever fetch and WebCrypto do). */
export function basicAuth(clientId: string, clientSecret: string): string {
  let binary = '';
  for (const byte of new TextEncoder().encode(`${clientId}:${clientSecret}`)) binary += String.fromCharCode(byte);
  return `Basic ${btoa(binary)}`;
}

function parseBody(text: string, tenantId: string): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null) return undefined;
  const b = body as Record<string, unknown>;
  const ok =
    b.kid === tenantId &&
    b.algorithm === 'HS256' &&
    b.issuer === RELAY_ISSUER &&
    b.audience === RELAY_ISSUER &&
    typeof b.jwt_secret_primary === 'string' &&
    b.jwt_secret_primary.length >= MIN_SECRET_LENGTH;
  return ok ? (b.jwt_secret_primary as string) : undefined;
}

/** Retry-After is delay-seconds or an HTTP date; anything unreadable counts as one second. */
export function parseRetryAfter(value: string | null, nowMs = Date.now()): number {
  if (value === null) return 1;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Math.max(0, Number(trimmed));
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? 1 : Math.max(0, Math.ceil((at - nowMs) / 1000));
}
