import type { IncomingMessage } from 'node:http';
import type { Logger } from '@service-relay/core';

/**
 * The request's logger: the caller's request id (the gateway's or the
 * registry's X-Request-Id) and tenant bound once. Made only when the request
 * has something to log: realtime writes no access line (the gateway does).
 */
export function requestLog(logger: Logger, req: IncomingMessage): Logger {
  return logger.child({ request_id: req.headers['x-request-id'], tenant_id: req.headers['x-relay-tenant-id'] });
}
