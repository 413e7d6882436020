import type { IncomingMessage } from 'node:http';
import { safeEqual } from '@service-relay/core';

/** The header one service proves itself with to another over HTTP (gRPC carries the same token as metadata). */
export const INTERNAL_TOKEN_HEADER = 'x-internal-token';

/**
 * The check that a request comes from one of our own services: it carries
 * INTERNAL_TOKEN in X-Internal-Token, compared in constant time. Only then
 * may its `x-relay-*` headers be believed.
 */
export function internalCaller(internalToken: string): (req: IncomingMessage) => boolean {
  return (req) => {
    const presented = req.headers[INTERNAL_TOKEN_HEADER];
    return typeof presented === 'string' && safeEqual(presented, internalToken);
  };
}
