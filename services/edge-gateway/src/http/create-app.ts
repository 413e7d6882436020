import { createHash } from 'node:crypto';
import type { Agent, IncomingMessage, ServerResponse } from 'node:http';
import { handleOps, type Logger, type ReadinessCheck } from '@service-relay/core';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { Authenticator } from '../auth/authenticator';
import { bearerToken } from '../auth/bearer-token';
import type { GatewayConfig } from '../config';
import type { RateLimiter } from '../rate-limit/rate-limiter';
import { declaredTooLarge, MAX_API_BODY_BYTES, MAX_HOST_FETCH_BODY_BYTES, readBodyLimited } from './body-limit';
import { applyCors } from './cors';
import type { GatewayMetrics } from './gateway-metrics';
import { beginRequest, contextOf } from './request-context';
import { INVALID_TOKEN_HEADERS, sendError } from './send-error';
import { createUpstreamProxy, type ForwardFn } from './upstream-proxy';

export interface AppOptions {
  config: Pick<GatewayConfig, 'registryUrl' | 'realtimeUrl' | 'internalToken' | 'corsOrigins' | 'upstreamTimeoutMs' | 'trustProxy'>;
  logger: Logger;
  metrics: GatewayMetrics;
  rateLimiter: RateLimiter;
  readiness: ReadinessCheck;
  /** Keep-alive agent for both upstreams; the owner destroys it on stop. */
  agent: Agent;
  authenticator?: Pick<Authenticator, 'authenticate'>;
  /**
   * false only for tests and the bench (to measure what auth costs); no
   * configuration variable reaches this, so production always authenticates.
   */
  authenticate?: boolean;
}

const HOST_FETCH_PATH = '/api/host/tenants/:tenantId/jwt_secret/fetch';

export function createApp(opts: AppOptions): Express {
  const { config, logger, metrics, rateLimiter } = opts;
  const authenticate = opts.authenticate !== false;
  const authenticator = opts.authenticator;
  if (authenticate && !authenticator) throw new Error('createApp: an authenticator is required unless authenticate is false');

  const proxyBase = { agent: opts.agent, timeoutMs: config.upstreamTimeoutMs, logger, metrics };
  const toRegistry = createUpstreamProxy({ ...proxyBase, name: 'registry', target: config.registryUrl, stripAuthorization: false });
  const toRealtime = createUpstreamProxy({ ...proxyBase, name: 'realtime', target: config.realtimeUrl, stripAuthorization: true });
  const ops = { metrics: metrics.registry, readiness: opts.readiness };

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.use((req: Request, res: Response, next: NextFunction) => {
    const ctx = beginRequest(req, res, { logger, metrics, trustProxy: config.trustProxy });
    if (applyCors(req, res, config.corsOrigins)) {
      ctx.route = 'preflight';
      return;
    }
    if (handleOps(req, res, ops)) {
      ctx.route = 'ops';
      return;
    }
    next();
  });

  app.all(HOST_FETCH_PATH, async (req: Request<{ tenantId: string }>, res: Response) => {
    const ctx = contextOf(req);
    ctx.route = 'host_fetch';
    if (req.method !== 'POST') return sendError(req, res, 'method_not_allowed', { allow: 'POST' });
    // Before anything touches the registry, and for every tenant id alike, so
    // the limit reveals nothing about which tenants exist.
    const decision = await rateLimiter.hit(hostFetchKey(ctx.clientAddress, req.params.tenantId));
    if (!decision.allowed) {
      metrics.rateLimited();
      return sendError(req, res, 'rate_limited', { 'retry-after': String(decision.retryAfterS) });
    }
    await forwardWithBody(req, res, MAX_HOST_FETCH_BODY_BYTES, toRegistry, { 'x-request-id': ctx.requestId });
  });

  app.use(async (req: Request, res: Response, next: NextFunction) => {
    if (req.path !== '/api/v1' && !req.path.startsWith('/api/v1/')) return next();
    const ctx = contextOf(req);
    ctx.route = 'api_v1';
    // Cheap and reveals nothing: refuse a declared oversize body before any work.
    if (declaredTooLarge(req, MAX_API_BODY_BYTES)) return sendError(req, res, 'payload_too_large');
    const headers: Record<string, string> = { 'x-internal-token': config.internalToken, 'x-request-id': ctx.requestId };
    if (authenticate) {
      const token = bearerToken(req.headers.authorization);
      if (token === undefined) return sendError(req, res, 'invalid_or_missing_token', INVALID_TOKEN_HEADERS);
      let result;
      try {
        result = await authenticator!.authenticate(token);
      } catch (err) {
        logger.warn({ request_id: ctx.requestId, err: (err as Error).message }, 'token check unavailable');
        return sendError(req, res, 'auth_unavailable');
      }
      if (!result.valid) {
        logger.debug({ request_id: ctx.requestId, reason: result.reason }, 'token refused');
        return sendError(req, res, 'invalid_or_missing_token', INVALID_TOKEN_HEADERS);
      }
      const id = result.identity;
      ctx.tenantId = id.tenantId;
      headers['x-relay-tenant-id'] = id.tenantId;
      headers['x-relay-user-id'] = id.userId;
      headers['x-relay-expires-at'] = String(id.expiresAt);
    }
    await forwardWithBody(req, res, MAX_API_BODY_BYTES, toRealtime, headers);
  });

  app.use((req: Request, res: Response) => sendError(req, res, 'not_found'));

  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    logger.error({ err, request_id: contextOf(req).requestId }, 'unhandled error');
    sendError(req, res, 'internal');
  });
  return app;
}

async function forwardWithBody(req: IncomingMessage, res: ServerResponse, limit: number, forward: ForwardFn, headers: Record<string, string>): Promise<void> {
  let body: Buffer | undefined;
  try {
    body = await readBodyLimited(req, limit);
  } catch {
    // The client went away mid-body; nobody is left to answer.
    res.destroy();
    return;
  }
  if (body === undefined) return sendError(req, res, 'payload_too_large');
  forward(req, res, body, headers);
}

/** Hashed so that an arbitrary path segment cannot make keys arbitrarily long. */
function hostFetchKey(clientAddress: string, tenantId: string): string {
  return `host-fetch:${createHash('sha256').update(`${clientAddress}\n${tenantId}`).digest('base64url')}`;
}
