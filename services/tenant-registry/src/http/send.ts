import type { ServerResponse } from 'node:http';
import { errorBody, httpStatusFor, isRelayError, sendJson, type ErrorCode } from '@service-relay/core';

/** Secrets may be in any admin answer; no cache may keep one. */
export const NO_STORE = { 'cache-control': 'no-store' } as const;

export function sendError(res: ServerResponse, code: ErrorCode, headers: Record<string, string> = {}): void {
  sendJson(res, httpStatusFor(code), errorBody(code), { ...NO_STORE, ...headers });
}

export function sendMethodNotAllowed(res: ServerResponse, allow: string): void {
  sendError(res, 'method_not_allowed', { allow });
}

/** The contract's code for an error thrown while handling a request; `internal` for anything unexpected (log it). */
export function errorCodeFor(err: unknown): ErrorCode {
  if (isRelayError(err)) return err.code;
  // A path parameter that is not valid percent-encoding: the only parameter is the tenant id.
  if (err instanceof URIError) return 'invalid_tenant_id';
  const bodyError = err as { type?: unknown; status?: unknown } | null | undefined;
  if (bodyError?.type === 'entity.too.large') return 'payload_too_large';
  if (typeof bodyError?.status === 'number' && bodyError.status >= 400 && bodyError.status < 500) return 'invalid_body';
  return 'internal';
}
