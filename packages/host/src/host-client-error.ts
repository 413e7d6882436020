import type { TokenRule } from './token-rules.js';

/**
 * Why a call failed. Stable: match on `code`, never on the message.
 * The server API (#13) adds: `invalid_request` (400: `problem` says what is
 * allowed), `payload_too_large` (413), `not_propagated` (503
 * change_not_propagated: the change is committed and keeps propagating, but
 * not every instance confirmed it in time; repeating the call is safe).
 * `token_rule`: signUserToken was asked for a token the relay would refuse
 * (`rule` names which rule, `problem` what is allowed); nothing was signed.
 */
export const HOST_CLIENT_ERROR_CODES = ['invalid_credentials', 'rate_limited', 'unavailable', 'invalid_response', 'invalid_request', 'payload_too_large', 'not_propagated', 'token_rule'] as const;

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
  /** For `invalid_request`: the contract's error code (`invalid_body`, `invalid_channel`). */
  readonly errorCode: string | undefined;
  /** For `invalid_request`: the server's sentence naming what is allowed (never a secret); for `token_rule`, the SDK's. */
  readonly problem: string | undefined;
  /** For `token_rule`: the rule the request broke (the verifier's reason code for it). */
  readonly rule: TokenRule | undefined;

  constructor(code: HostClientErrorCode, message: string, opts: { status?: number; retryAfterS?: number; errorCode?: string; problem?: string; rule?: TokenRule; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'HostClientError';
    this.code = code;
    this.status = opts.status;
    this.retryAfterS = opts.retryAfterS;
    this.errorCode = opts.errorCode;
    this.problem = opts.problem;
    this.rule = opts.rule;
  }
}

export function isHostClientError(err: unknown): err is HostClientError {
  return err instanceof HostClientError;
}
