import { isRelayError, type ErrorCode } from '@service-relay/core';

/** Secrets may be in any admin answer; no cache may keep one. */
export const NO_STORE = { 'cache-control': 'no-store' } as const;

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
