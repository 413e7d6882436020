import type { IncomingMessage, ServerResponse } from 'node:http';
import { redactUrl, type Logger } from '@service-relay/core';
import { requestIdOf } from '@service-relay/edge';
import type { GatewayMetrics, RouteLabel } from '../metrics';

/** Per-request facts the handlers fill in and the access log reads. */
export interface RequestContext {
  requestId: string;
  /** The request's logger: request_id bound once, so no log line of the request has to pass it. */
  log: Logger;
  clientAddress: string;
  route: RouteLabel;
  tenantId?: string;
  started: number;
  /** Answered by a limit (the refused-credential budget, shedding): counted in metrics, logged at debug only. */
  quiet?: boolean;
}

const contexts = new WeakMap<IncomingMessage, RequestContext>();

export function contextOf(req: IncomingMessage): RequestContext {
  const ctx = contexts.get(req);
  if (!ctx) throw new Error('request context missing: beginRequest() must run first');
  return ctx;
}

/** The request's logger (request_id bound) once beginRequest() ran for it, else `fallback`. */
export function logOf(req: IncomingMessage, fallback: Logger): Logger {
  return contexts.get(req)?.log ?? fallback;
}

/**
 * Starts a request: a client X-Request-Id is kept when it is short and plain
 * (it ends up in logs and upstream headers), otherwise one is generated; it is
 * returned on every response. One JSON access line per request, at close.
 */
export function beginRequest(req: IncomingMessage, res: ServerResponse, opts: { logger: Logger; metrics: GatewayMetrics; trustProxy: boolean }): RequestContext {
  const requestId = requestIdOf(req.headers['x-request-id']);
  const log = opts.logger.child({ request_id: requestId });
  const ctx: RequestContext = { requestId, log, clientAddress: clientAddress(req, opts.trustProxy), route: 'not_found', started: performance.now() };
  contexts.set(req, ctx);
  res.setHeader('x-request-id', requestId);
  res.once('close', () => {
    const status = res.headersSent ? res.statusCode : 0;
    const ms = performance.now() - ctx.started;
    opts.metrics.request(ctx.route, status, ms / 1000);
    const line = {
      method: req.method,
      path: redactUrl(req.url ?? ''),
      route: ctx.route,
      status,
      duration_ms: Math.round(ms * 100) / 100,
      client: ctx.clientAddress,
      tenant_id: ctx.tenantId,
      completed: res.writableFinished,
    };
    // Health probes every few seconds would drown the log at info, and so
    // would a flood of refusals by a limit (each one is counted instead).
    if (ctx.route === 'ops' || ctx.quiet) log.debug(line, 'request');
    else log.info(line, 'request');
  });
  return ctx;
}

/**
 * The socket peer, or with TRUST_PROXY the last X-Forwarded-For hop: the one
 * our own proxy appended. Earlier entries are whatever the client wrote.
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.headers['x-forwarded-for'];
    const list = (Array.isArray(xff) ? xff.join(',') : (xff ?? '')).split(',');
    const last = list[list.length - 1]?.trim();
    if (last) return last;
  }
  return req.socket.remoteAddress ?? 'unknown';
}
