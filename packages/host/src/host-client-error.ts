/** Why a secret fetch failed. Stable: match on `code`, never on the message. */
export const HOST_CLIENT_ERROR_CODES = ['invalid_credentials', 'rate_limited', 'unavailable', 'invalid_response'] as const;

export type HostClientErrorCode = (typeof HOST_CLIENT_ERROR_CODES)[number];

/**
 * The one error type of this package. Messages are fixed and never contain
 * the host-sync secret, the JWT secret or a response body.
 */
export class HostClientError extends Error {
  readonly code: HostClientErrorCode;
  /** HTTP status of the answer, when there was one. */
  readonly status: number | undefined;
  /** For `rate_limited`: the seconds the server's Retry-After asked to wait. */
  readonly retryAfterS: number | undefined;

  constructor(code: HostClientErrorCode, message: string, opts: { status?: number; retryAfterS?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'HostClientError';
    this.code = code;
    this.status = opts.status;
    this.retryAfterS = opts.retryAfterS;
  }
}

export function isHostClientError(err: unknown): err is HostClientError {
  return err instanceof HostClientError;
}
