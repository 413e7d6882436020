import type { ServerResponse } from 'node:http';
import { errorBody, httpStatusFor, sendJson, type ErrorCode } from '@service-relay/core';

/** Secrets may be in any admin answer; no cache may keep one. */
export const NO_STORE = { 'cache-control': 'no-store' } as const;

export function sendError(res: ServerResponse, code: ErrorCode, headers: Record<string, string> = {}): void {
  sendJson(res, httpStatusFor(code), errorBody(code), { ...NO_STORE, ...headers });
}

export function sendMethodNotAllowed(res: ServerResponse, allow: string): void {
  sendError(res, 'method_not_allowed', { allow });
}
