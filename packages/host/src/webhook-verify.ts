/**
 * Verifying what service-relay sends a host (Standard Webhooks headers:
 * `webhook-id`, `webhook-timestamp`, `webhook-signature`): callbacks now,
 * webhooks alike. A vendored copy of the relay's signer
 * (@service-relay/core webhook-signature.ts), which a published SDK cannot
 * depend on; webhook-verify.test.ts signs with the relay's and verifies with
 * this one so the two cannot drift apart. WebCrypto only (no Node
 * built-ins, like the rest of the SDK), so verifying is async; its
 * `subtle.verify` compares in constant time.
 */

/** A request whose timestamp is further than this from the host's clock (either way) is refused: 5 minutes. */
export const DEFAULT_TOLERANCE_S = 300;

export type RelayHeaders = Readonly<Record<string, string | string[] | undefined>> | { get(name: string): string | null };

export interface VerifyOptions {
  /** Seconds; default 300. */
  toleranceS?: number;
  /** The host's clock in unix seconds; default now. */
  nowS?: number;
}

/** Why a request was refused (the request is not from the relay, or is replayed). */
export type SignatureFailure = 'missing_headers' | 'bad_timestamp' | 'stale' | 'bad_signature';

export class RelaySignatureError extends Error {
  constructor(readonly reason: SignatureFailure) {
    super(`service-relay signature refused: ${reason}`);
    this.name = 'RelaySignatureError';
  }
}

function header(headers: RelayHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(n: string): string | null }).get(name) ?? undefined;
  const v = (headers as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;
}

function base64Bytes(b64: string): Uint8Array<ArrayBuffer> | undefined {
  try {
    const bin = atob(b64);
    const out = new Uint8Array(new ArrayBuffer(bin.length));
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  } catch {
    return undefined;
  }
}

/**
 * Resolves when `body` (the raw text, exactly as received) carries a valid
 * signature by one of `secrets` (the current secret and, during a rotation,
 * the previous one) within the tolerance; rejects with RelaySignatureError
 * otherwise.
 */
export async function verifyRelaySignature(body: string, headers: RelayHeaders, secrets: string | readonly string[], opts: VerifyOptions = {}): Promise<void> {
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigs = header(headers, 'webhook-signature');
  if (id === undefined || ts === undefined || sigs === undefined) throw new RelaySignatureError('missing_headers');
  if (!/^\d{1,12}$/.test(ts)) throw new RelaySignatureError('bad_timestamp');
  const now = opts.nowS ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(ts)) > (opts.toleranceS ?? DEFAULT_TOLERANCE_S)) throw new RelaySignatureError('stale');
  const candidates = sigs
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => base64Bytes(s.slice(3)))
    .filter((b): b is Uint8Array<ArrayBuffer> => b !== undefined);
  const signed = new TextEncoder().encode(`${id}.${ts}.${body}`);
  for (const secret of typeof secrets === 'string' ? [secrets] : secrets) {
    const raw = base64Bytes(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
    if (!raw) continue;
    const key = await crypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    for (const c of candidates) if (await crypto.subtle.verify('HMAC', key, c, signed)) return;
  }
  throw new RelaySignatureError('bad_signature');
}

/** What a callback asks (docs/PROTOCOL.md "Callbacks"). */
export interface CallbackRequest {
  type: 'subscribe' | 'publish';
  tenant_id: string;
  user_id: string;
  channel: string;
  transport: 'ws' | 'rest';
  /** The verified claims of the user's token the relay holds: tenant_id, user_id, exp, and cap when the token has one. */
  claims: { tenant_id: string; user_id: string; exp: number; cap?: Record<string, string[]> };
}

/**
 * A callback request, verified: rejects with RelaySignatureError when the
 * signature is bad or stale, else resolves to the parsed request.
 */
export async function verifyCallback(body: string, headers: RelayHeaders, secrets: string | readonly string[], opts?: VerifyOptions): Promise<CallbackRequest> {
  await verifyRelaySignature(body, headers, secrets, opts);
  return JSON.parse(body) as CallbackRequest;
}

/** The body of a callback's answer (status 200, `content-type: application/json`). */
export function callbackAnswer(allow: boolean, opts: { ttlS?: number; presence?: Record<string, unknown> } = {}): string {
  return JSON.stringify({ allow, ...(opts.ttlS !== undefined && { ttl_s: opts.ttlS }), ...(opts.presence !== undefined && { presence: opts.presence }) });
}

/** One event of a webhook request's `events` (docs/PROTOCOL.md "Webhooks"). */
export interface WebhookEvent {
  id: string;
  type: 'channel_occupied' | 'channel_vacated' | 'member_added' | 'member_removed' | 'user_connected' | 'user_disconnected';
  tenant_id: string;
  created_at: string;
  channel?: string;
  user_id?: string;
  data?: unknown;
}

/**
 * A webhook request (#32), verified: rejects with RelaySignatureError when
 * the signature is bad or the timestamp outside the tolerance (a replay),
 * else resolves to its events. `body` must be the raw text as received;
 * `secret` the endpoint's signing secret (or, during a rotation, both).
 */
export async function verifyWebhook(body: string, headers: RelayHeaders, secret: string | readonly string[], opts?: VerifyOptions): Promise<WebhookEvent[]> {
  await verifyRelaySignature(body, headers, secret, opts);
  const parsed = JSON.parse(body) as { events?: unknown };
  if (!Array.isArray(parsed.events)) throw new RelaySignatureError('bad_signature');
  return parsed.events as WebhookEvent[];
}
