import type { Logger } from '@service-relay/core';
import type { Response } from 'express';

/**
 * The request's logger, made once per request by createApp() with the
 * request id bound (`req_id`, the registry's key since its first log line),
 * so no handler passes the id by hand.
 */
export function requestLog(res: Response, fallback: Logger): Logger {
  return (res.locals as { log?: Logger }).log ?? fallback;
}

/** Binds `requestId` into a child of `logger` and keeps it for requestLog(). */
export function bindRequestLog(res: Response, logger: Logger, requestId: string): Logger {
  const log = logger.child({ req_id: requestId });
  (res.locals as { log?: Logger }).log = log;
  return log;
}
