import { status as GrpcStatus } from '@grpc/grpc-js';

/**
 * The closed set of error codes. Every error a client can see is one of these,
 * and the tables below are the only place a code becomes a status.
 */
export const ERROR_CODES = [
  'invalid_or_missing_token',
  'invalid_host_sync_credentials',
  'invalid_admin_token',
  'invalid_internal_token',
  'auth_unavailable',
  'tenant_not_found',
  'invalid_tenant_id',
  'not_found',
  'method_not_allowed',
  'upgrade_required',
  'invalid_channel',
  'invalid_body',
  'invalid_query',
  'invalid_channel_rules',
  'invalid_tenant_meta',
  'invalid_limits',
  'invalid_callbacks',
  'plan_not_found',
  'plan_in_use',
  'invalid_webhook',
  'webhook_not_found',
  'too_many_webhooks',
  'payload_too_large',
  'headers_too_large',
  'bad_request',
  'rate_limited',
  'forbidden_topic',
  'forbidden_channel',
  'callback_unavailable',
  'presence_not_enabled',
  'invalid_topic',
  'invalid_frame',
  'identity_mismatch',
  'too_many_subscriptions',
  'too_many_connections',
  'upstream_unavailable',
  'upstream_timeout',
  'unavailable',
  'change_not_propagated',
  'internal',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

const HTTP_STATUS: Record<ErrorCode, number> = {
  invalid_or_missing_token: 401,
  invalid_host_sync_credentials: 401,
  invalid_admin_token: 401,
  invalid_internal_token: 401,
  auth_unavailable: 503,
  tenant_not_found: 404,
  invalid_tenant_id: 400,
  not_found: 404,
  method_not_allowed: 405,
  upgrade_required: 426,
  invalid_channel: 400,
  invalid_body: 400,
  invalid_query: 400,
  invalid_channel_rules: 400,
  invalid_tenant_meta: 400,
  invalid_limits: 400,
  invalid_callbacks: 400,
  plan_not_found: 404,
  plan_in_use: 409,
  invalid_webhook: 400,
  webhook_not_found: 404,
  too_many_webhooks: 409,
  payload_too_large: 413,
  headers_too_large: 431,
  bad_request: 400,
  rate_limited: 429,
  forbidden_topic: 403,
  forbidden_channel: 403,
  callback_unavailable: 503,
  presence_not_enabled: 400,
  invalid_topic: 400,
  invalid_frame: 400,
  identity_mismatch: 403,
  too_many_subscriptions: 429,
  too_many_connections: 429,
  upstream_unavailable: 502,
  upstream_timeout: 504,
  unavailable: 503,
  change_not_propagated: 503,
  internal: 500,
};

const GRPC_STATUS: Record<ErrorCode, GrpcStatus> = {
  invalid_or_missing_token: GrpcStatus.UNAUTHENTICATED,
  invalid_host_sync_credentials: GrpcStatus.UNAUTHENTICATED,
  invalid_admin_token: GrpcStatus.UNAUTHENTICATED,
  invalid_internal_token: GrpcStatus.UNAUTHENTICATED,
  auth_unavailable: GrpcStatus.UNAVAILABLE,
  tenant_not_found: GrpcStatus.NOT_FOUND,
  invalid_tenant_id: GrpcStatus.INVALID_ARGUMENT,
  not_found: GrpcStatus.NOT_FOUND,
  method_not_allowed: GrpcStatus.UNIMPLEMENTED,
  upgrade_required: GrpcStatus.FAILED_PRECONDITION,
  invalid_channel: GrpcStatus.INVALID_ARGUMENT,
  invalid_body: GrpcStatus.INVALID_ARGUMENT,
  invalid_query: GrpcStatus.INVALID_ARGUMENT,
  invalid_channel_rules: GrpcStatus.INVALID_ARGUMENT,
  invalid_tenant_meta: GrpcStatus.INVALID_ARGUMENT,
  invalid_limits: GrpcStatus.INVALID_ARGUMENT,
  invalid_callbacks: GrpcStatus.INVALID_ARGUMENT,
  plan_not_found: GrpcStatus.NOT_FOUND,
  plan_in_use: GrpcStatus.FAILED_PRECONDITION,
  invalid_webhook: GrpcStatus.INVALID_ARGUMENT,
  webhook_not_found: GrpcStatus.NOT_FOUND,
  too_many_webhooks: GrpcStatus.FAILED_PRECONDITION,
  payload_too_large: GrpcStatus.RESOURCE_EXHAUSTED,
  headers_too_large: GrpcStatus.RESOURCE_EXHAUSTED,
  bad_request: GrpcStatus.INVALID_ARGUMENT,
  rate_limited: GrpcStatus.RESOURCE_EXHAUSTED,
  forbidden_topic: GrpcStatus.PERMISSION_DENIED,
  forbidden_channel: GrpcStatus.PERMISSION_DENIED,
  callback_unavailable: GrpcStatus.UNAVAILABLE,
  presence_not_enabled: GrpcStatus.FAILED_PRECONDITION,
  invalid_topic: GrpcStatus.INVALID_ARGUMENT,
  invalid_frame: GrpcStatus.INVALID_ARGUMENT,
  identity_mismatch: GrpcStatus.PERMISSION_DENIED,
  too_many_subscriptions: GrpcStatus.RESOURCE_EXHAUSTED,
  too_many_connections: GrpcStatus.RESOURCE_EXHAUSTED,
  upstream_unavailable: GrpcStatus.UNAVAILABLE,
  upstream_timeout: GrpcStatus.DEADLINE_EXCEEDED,
  unavailable: GrpcStatus.UNAVAILABLE,
  change_not_propagated: GrpcStatus.UNAVAILABLE,
  internal: GrpcStatus.INTERNAL,
};

export class RelayError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string = code, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RelayError';
    this.code = code;
  }
}

export function isRelayError(err: unknown): err is RelayError {
  return err instanceof RelayError;
}

export function httpStatusFor(code: ErrorCode): number {
  return HTTP_STATUS[code];
}

export function grpcStatusFor(code: ErrorCode): GrpcStatus {
  return GRPC_STATUS[code];
}

/** The contract's error body, serialized once per code. */
const BODIES = new Map<ErrorCode, string>(ERROR_CODES.map((c) => [c, JSON.stringify({ errors: [c] })]));
/**
 * `{"errors":[code]}`; `extra` members follow `errors` when an answer says
 * more (`change_not_propagated`'s committed view, `invalid_channel_rules`'s
 * `problem`). Clients switch on `errors` alone.
 */
export function errorBody(code: ErrorCode, extra?: Readonly<Record<string, unknown>>): string {
  return extra === undefined ? BODIES.get(code)! : JSON.stringify({ errors: [code], ...extra });
}

/** Maps a thrown value to a code; anything unknown is `internal`. */
export function codeOf(err: unknown): ErrorCode {
  return isRelayError(err) ? err.code : 'internal';
}
