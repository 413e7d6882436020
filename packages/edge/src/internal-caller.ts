import type { IncomingMessage } from 'node:http';
import { safeEqualAny } from '@service-relay/core';

/** The header one service proves itself with to another over HTTP (gRPC carries the same token as metadata). */
export const INTERNAL_TOKEN_HEADER = 'x-internal-token';

/**
 * The check that a request comes from one of our own services: it carries
 * INTERNAL_TOKEN (or, during a rotation, INTERNAL_TOKEN_NEXT: `accepted`
 * lists both) in X-Internal-Token, compared in constant time. Only then may
 * its `x-relay-*` headers be believed.
 */
export function internalCaller(accepted: string | readonly string[]): (req: IncomingMessage) => boolean {
  return (req) => {
    const presented = req.headers[INTERNAL_TOKEN_HEADER];
    return typeof presented === 'string' && safeEqualAny(presented, accepted);
  };
}
