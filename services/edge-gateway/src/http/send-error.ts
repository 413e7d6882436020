import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody, httpStatusFor, sendJson, type ErrorCode } from '@service-relay/core';

/**
 * Answers with the contract's error body. When the request body was not read,
 * the connection is closed after the answer: draining an unread (possibly
 * huge) body just to keep the connection alive would cost more than a new one.
 */
export function sendError(req: IncomingMessage, res: ServerResponse, code: ErrorCode, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (!req.complete) res.setHeader('connection', 'close');
  sendJson(res, httpStatusFor(code), errorBody(code), headers);
}

export const INVALID_TOKEN_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'www-authenticate': 'Bearer realm="service-relay", error="invalid_token"',
});
