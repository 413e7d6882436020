import { HostClientError } from './host-client-error.js';
import { basicAuth, parseRetryAfter } from './secret-fetch.js';
import type { JsonValue } from './user-token.js';

/** A message the host server published: it has no user. */
export interface ServerMessage {
  id: string;
  channel: string;
  user_id: null;
  from: 'server';
  data: JsonValue;
  created_at: string;
}

export interface PresenceMember {
  user_id: string;
  data?: JsonValue;
}

export interface ChannelPresence {
  channel: string;
  members: PresenceMember[];
}

export interface ServerApiOptions {
  baseUrl: string;
  tenantId: string;
  clientId: string;
  clientSecret: string;
  timeoutMs: number;
  fetch: typeof fetch;
}

/**
 * One call of the host server API (`/api/host/tenants/{tenant}/…`, HTTP
 * Basic with the host-sync credential). Resolves the parsed JSON body of a
 * 2xx answer; every failure is a HostClientError with a fixed message (the
 * server's `problem` sentence for a 400 is kept in `problem`).
 */
export async function callServerApi(o: ServerApiOptions, method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
  const url = `${o.baseUrl.replace(/\/+$/, '')}/api/host/tenants/${encodeURIComponent(o.tenantId)}/${path}`;
  const authorization = basicAuth(o.clientId, o.clientSecret);
  const what = `${method} …/${path.split('/')[0]}`;
  let res: Response;
  let text: string;
  try {
    res = await o.fetch(url, {
      method,
      headers: { authorization, accept: 'application/json', ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(o.timeoutMs),
    });
    text = await res.text();
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
    throw new HostClientError('unavailable', timedOut ? `${what} timed out after ${o.timeoutMs} ms` : `${what} failed: service-relay unreachable`, { cause: err });
  }
  const parsed = parseJson(text);
  if (res.status >= 200 && res.status < 300) {
    if (parsed === undefined) throw new HostClientError('invalid_response', `${what}: the answer is not JSON`, { status: res.status });
    return parsed;
  }
  const errorCode = firstError(parsed);
  if (res.status === 401) throw new HostClientError('invalid_credentials', `${what} refused: invalid host-sync credentials (wrong tenant id, client id or secret, or the tenant is disabled)`, { status: 401 });
  if (res.status === 429) {
    const retryAfterS = parseRetryAfter(res.headers.get('retry-after'));
    throw new HostClientError('rate_limited', `${what} rate limited: retry after ${retryAfterS} s`, { status: 429, retryAfterS });
  }
  if (res.status === 413) throw new HostClientError('payload_too_large', `${what} refused: data larger than 64 KiB`, { status: 413 });
  if (res.status === 400) {
    const problem = typeof (parsed as { problem?: unknown } | undefined)?.problem === 'string' ? (parsed as { problem: string }).problem : undefined;
    throw new HostClientError('invalid_request', `${what} refused: ${errorCode ?? 'bad request'}${problem ? ` (${problem})` : ''}`, { status: 400, ...(errorCode && { errorCode }), ...(problem && { problem }) });
  }
  if (res.status === 503 && errorCode === 'change_not_propagated') {
    throw new HostClientError('not_propagated', `${what}: committed, but not yet confirmed on every instance; it keeps propagating (repeating the call is safe)`, { status: 503, retryAfterS: parseRetryAfter(res.headers.get('retry-after')) });
  }
  if (res.status >= 500) throw new HostClientError('unavailable', `${what} failed: service-relay answered ${res.status}`, { status: res.status });
  throw new HostClientError('invalid_response', `${what}: unexpected status ${res.status}`, { status: res.status });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function firstError(body: unknown): string | undefined {
  const errors = (body as { errors?: unknown } | undefined)?.errors;
  return Array.isArray(errors) && typeof errors[0] === 'string' ? errors[0] : undefined;
}
