import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import { errorBody, httpStatusFor, type ErrorCode } from '@service-relay/core';
import { sendJson } from './json-response';

export interface SendErrorOptions {
  /**
   * Close the connection after the answer when the request body was not read
   * to its end: draining an unread (possibly huge) body just to keep the
   * connection alive would cost more than a new connection.
   */
  closeIfUnread?: boolean;
}

/**
 * The contract's error answer: the status from the code table, the body
 * `{"errors":[code]}`. An answer already under way cannot become an error:
 * the connection is cut instead, so the client sees a broken answer.
 */
export function sendError(res: ServerResponse, code: ErrorCode, headers: Record<string, string> = {}, opts: SendErrorOptions = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (opts.closeIfUnread && res.req !== undefined && hasUnreadBody(res.req)) res.setHeader('connection', 'close');
  const status = httpStatusFor(code);
  sendJson(res, status, errorBody(code), status === 503 ? withRetryAfter(headers) : headers);
}

/**
 * A body was declared and has not been read to its end. `complete` alone
 * is not enough: Node sets it after the request handler's first turn even
 * for a request without a body, so an answer given at once (a refusal by a
 * limit) would close every connection, and a flood of refused requests
 * would become a flood of new connections (measured: the gateway's accept
 * queue full for a whole overload test, valid clients waiting seconds).
 */
function hasUnreadBody(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Every 503 is retryable (a peer is restarting, failing over or out of
 * capacity) and says when to try again: one second unless the caller knows
 * better.
 */
function withRetryAfter(headers: Record<string, string>): Record<string, string> {
  return Object.keys(headers).some((k) => k.toLowerCase() === 'retry-after') ? headers : { ...headers, 'retry-after': '1' };
}

/**
 * The same answer as raw HTTP/1.1 bytes, for a socket that never got a
 * response object (a refused WebSocket upgrade); it closes the connection.
 * `headerLines` are extra `Name: value\r\n` lines.
 */
export function rawErrorResponse(code: ErrorCode, headerLines = ''): string {
  const status = httpStatusFor(code);
  const body = errorBody(code);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    headerLines +
    (status === 503 && !/^retry-after:/im.test(headerLines) ? 'Retry-After: 1\r\n' : '') +
    'Connection: close\r\n\r\n' +
    body
  );
}
