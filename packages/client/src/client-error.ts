/**
 * Codes the server sends in `error` frames and HTTP answers a client can meet
 * (docs/PROTOCOL.md "Error frame codes" and "REST error codes"). Kept as a
 * closed list so an app can switch on `code` exhaustively.
 */
export const SERVER_ERROR_CODES = [
  'invalid_frame',
  'invalid_topic',
  'forbidden_topic',
  'forbidden_channel',
  'callback_unavailable',
  'payload_too_large',
  'too_many_subscriptions',
  'too_many_connections',
  'presence_not_enabled',
  'unavailable',
  'rate_limited',
  'invalid_or_missing_token',
  'auth_unavailable',
  'identity_mismatch',
  'internal',
  'not_found',
  'upgrade_required',
  'headers_too_large',
  'bad_request',
  'upstream_unavailable',
  'upstream_timeout',
  // REST answers (a client that also calls the REST API can reuse the type).
  'invalid_channel',
  'invalid_body',
  'invalid_query',
  'method_not_allowed',
] as const;

/** Failures the client itself detects (no server frame carries these). */
export const CLIENT_ERROR_CODES = [
  /** A request's connection closed before its reply came: the frame may or may not have taken effect. */
  'connection_lost',
  /** No reply within `requestTimeoutMs`. */
  'timeout',
  /** `close()` was called, or the client gave up reconnecting; nothing more will be sent. */
  'closed',
  /** `getToken` threw or returned something that is not a non-empty string. */
  'token_provider_failed',
  /** The server sent something this client cannot read (not JSON, no `type`). */
  'protocol_error',
  /** A close code that means the client must stop: 4409 (disconnected by the host), 1002, 1007. */
  'disconnected',
] as const;

export type ServerErrorCode = (typeof SERVER_ERROR_CODES)[number];
export type ClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];
export type RelayErrorCode = ServerErrorCode | ClientErrorCode;

const SERVER_CODES: ReadonlySet<string> = new Set(SERVER_ERROR_CODES);

export function isServerErrorCode(code: unknown): code is ServerErrorCode {
  return typeof code === 'string' && SERVER_CODES.has(code);
}

export interface ErrorDetails {
  /** The client frame that failed: `subscribe`, `publish`, `auth`, … */
  frame?: string;
  /** The channel the failed request named. */
  topic?: string;
  /** The close code of the connection, when a close caused this. */
  closeCode?: number;
  /** The code exactly as the server sent it (a code this version does not know becomes `internal`). */
  serverCode?: string;
  /** The bound that was hit, when the server says (`too_many_subscriptions`, `rate_limited`, `payload_too_large`). */
  limit?: number;
  /** When to try again, when the server says (`rate_limited`). */
  retryAfterMs?: number;
  /** On `timeout`: whether the frame had been sent (false: it never left, so it certainly took no effect). */
  sent?: boolean;
  cause?: unknown;
}

/** The typed error of an `error` frame (its `ref` already matched). */
export function errorFromFrame(frame: { code?: unknown; limit?: unknown; retry_after_ms?: unknown }, context: { frame?: string; topic?: string }): RelayClientError {
  const raw = typeof frame.code === 'string' ? frame.code : 'internal';
  const code = isServerErrorCode(raw) ? raw : 'internal';
  return new RelayClientError(code, `${context.frame ?? 'a frame'}${context.topic === undefined ? '' : ` on ${context.topic}`} refused: ${raw}`, {
    ...context,
    serverCode: raw,
    ...(typeof frame.limit === 'number' && { limit: frame.limit }),
    ...(typeof frame.retry_after_ms === 'number' && { retryAfterMs: frame.retry_after_ms }),
  });
}

/** Every error the client rejects with or emits. Switch on `code`, never on the message. */
export class RelayClientError extends Error {
  override readonly name = 'RelayClientError';

  constructor(
    readonly code: RelayErrorCode,
    message: string,
    /** Extra facts: the frame type that failed, the channel, the close code, what the server said. */
    readonly details: ErrorDetails = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
  }
}

export function isRelayClientError(err: unknown): err is RelayClientError {
  return err instanceof RelayClientError;
}
