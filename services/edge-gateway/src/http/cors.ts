import type { IncomingMessage, ServerResponse } from 'node:http';

const ALLOW_METHODS = 'GET, POST, OPTIONS';
/**
 * Every request header the API documents: API.md's `Idempotency-Key` on a
 * publish, `X-Request-Id`, and W3C trace context (OPERATIONS.md "Tracing").
 */
export const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, Idempotency-Key, X-Request-Id, traceparent, tracestate';
const EXPOSE_HEADERS = 'X-Request-Id, Retry-After, WWW-Authenticate, X-Relay-Limit';

/**
 * CORS for browser REST clients. The allowed origin is echoed (never `*`):
 * `Authorization` must be listed explicitly anyway, and echoing keeps caches
 * honest with `Vary: Origin`. Returns true when it answered a preflight.
 */
export function applyCors(req: IncomingMessage, res: ServerResponse, allowed: readonly string[] | '*'): boolean {
  const origin = req.headers.origin;
  const isPreflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
  if (allowed !== '*' && allowed.length === 0) {
    if (!isPreflight) return false;
    // No origin is allowed, yet a preflight is still answered here, never by
    // the bearer check (a 401 to a request that cannot carry a token): a 204
    // without allow headers, which the browser refuses.
    res.writeHead(204, { 'content-length': '0' });
    res.end();
    return true;
  }
  res.setHeader('vary', 'Origin');
  const ok = origin !== undefined && (allowed === '*' || allowed.includes(origin));
  if (ok) {
    res.setHeader('access-control-allow-origin', origin);
    res.setHeader('access-control-expose-headers', EXPOSE_HEADERS);
  }
  if (!isPreflight) return false;
  // A disallowed origin gets a plain 204 without allow headers: the browser then refuses.
  if (ok) {
    res.setHeader('access-control-allow-methods', ALLOW_METHODS);
    res.setHeader('access-control-allow-headers', CORS_ALLOW_HEADERS);
    res.setHeader('access-control-max-age', '600');
  }
  res.writeHead(204, { 'content-length': '0' });
  res.end();
  return true;
}
