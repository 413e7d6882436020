import type { Agent, IncomingMessage, ServerResponse } from 'node:http';
import type { ErrorCode, Logger, UsageRecorder } from '@service-relay/core';
import { capabilityJson } from '@service-relay/channels';
import {
  authorizationOf,
  bearerToken,
  DATA_LIMIT_HEADERS,
  declaredTooLarge,
  handleHealth,
  INTERNAL_TOKEN_HEADER,
  INVALID_TOKEN_HEADERS,
  LIMIT_HEADER,
  MAX_API_BODY_BYTES,
  MAX_HOST_API_BODY_BYTES,
  MAX_HOST_FETCH_BODY_BYTES,
  readBodyOrRefuse,
  refuseTooLarge,
  sendError,
} from '@service-relay/edge';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { Authenticator } from '../auth/authenticator';
import type { GatewayConfig } from '../config';
import type { ConnectionHold } from '../limits/connection-hold';
import type { LoadShedder } from '../limits/load-shedder';
import { LaneFullError, type UnprovenLane } from '../limits/unproven-lane';
import type { RefusalBudget } from '../limits/refusal-budget';
import { applyCors } from './cors';
import type { GatewayMetrics } from '../metrics';
import { beginRequest, contextOf } from './request-context';
import { createUpstreamProxy, type ForwardFn } from './upstream-proxy';
import { roundRobin } from './upstream-pool';

export interface AppOptions {
  config: Pick<GatewayConfig, 'registryUrl' | 'realtimeUrl' | 'internalToken' | 'corsOrigins' | 'upstreamTimeoutMs' | 'trustProxy'> & Partial<Pick<GatewayConfig, 'maxRequestHeaders' | 'realtimeUrls' | 'registryUrls' | 'overload'>>;
  logger: Logger;
  metrics: GatewayMetrics;
  /** Keep-alive agent for both upstreams; the owner destroys it on stop. */
  agent: Agent;
  authenticator?: Pick<Authenticator, 'check'>;
  /**
   * false only for tests and the bench (to measure what auth costs); no
   * configuration variable reaches this, so production always authenticates.
   */
  authenticate?: boolean;
  /** Per client address budget of refused credentials (docs/OPERATIONS.md "Overload"); none: unlimited. */
  budget?: RefusalBudget;
  /** Sheds new requests past the in-flight and event-loop-delay bounds; none: never. */
  shedder?: LoadShedder;
  /** Stops reading a connection for its Retry-After after the gateway's own 429; none: never. */
  hold?: ConnectionHold;
  /**
   * Bounds registry calls for host credentials nothing vouches for yet; none:
   * unbounded. (Verifier calls take it through the authenticator's gate.)
   */
  lane?: UnprovenLane;
  /** Usage metering (#30): refusals of a known tenant; none: not counted. */
  usage?: UsageRecorder;
}

/**
 * Matched on the raw path and never decoded: Express would decode a `:tenantId`
 * parameter and throw on bad percent-encoding (`%ZZ` answered 500). Whatever
 * the segment is, the registry judges it, and a non-canonical id is just an
 * unknown tenant (the contract's byte-identical 401).
 */
const HOST_FETCH_PATH = /^\/api\/host\/tenants\/[^/]*\/jwt_secret\/fetch\/?$/;
/** Everything else a host server calls (#13: publish, presence, disconnect, revoke_tokens); the registry routes and judges it. */
const HOST_API_PATH = /^\/api\/host\/tenants\/[^/]*\/.+$/;

/** The tenant segment of a host path (`/api/host/tenants/{segment}/…`), raw. */
const HOST_TENANT_SEGMENT = /^\/api\/host\/tenants\/([^/]*)\//;

/** Default cap on request header fields (MAX_REQUEST_HEADERS); browsers send about 20. */
const DEFAULT_MAX_REQUEST_HEADERS = 100;

export function createApp(opts: AppOptions): Express {
  const { config, logger, metrics } = opts;
  const maxHeaders = config.maxRequestHeaders ?? DEFAULT_MAX_REQUEST_HEADERS;
  const authenticate = opts.authenticate !== false;
  const authenticator = opts.authenticator;
  if (authenticate && !authenticator) throw new Error('createApp: an authenticator is required unless authenticate is false');

  const proxyBase = { agent: opts.agent, timeoutMs: config.upstreamTimeoutMs, logger, metrics };
  // Several registry replicas (REGISTRY_URL a list): each call goes to the next, and a refused connection to the one after.
  const registry = roundRobin(config.registryUrls ?? [config.registryUrl]);
  // The host-sync fetch only reads (its failures count toward a rate limit, twice at worst): safe to send again.
  const toRegistry = createUpstreamProxy({
    ...proxyBase,
    name: 'registry',
    target: registry.urls[0]!,
    ...(registry.size > 1 && { router: registry.next }),
    stripAuthorization: false,
    safeToRepeat: (req) => HOST_FETCH_PATH.test((req.url ?? '').split('?', 1)[0]!),
  });
  // Several realtime instances (REALTIME_URL a list): each request goes to the next.
  const realtime = roundRobin(config.realtimeUrls ?? [config.realtimeUrl]);
  const toRealtime = createUpstreamProxy({ ...proxyBase, name: 'realtime', target: realtime.urls[0]!, ...(realtime.size > 1 && { router: realtime.next }), stripAuthorization: true });
  const { budget, shedder, hold, lane } = opts;
  /** Past the unproven lane's queue: shed as the load shedder does (503 + Retry-After, never auth_unavailable). */
  const laneFull = (res: Response) => {
    metrics.shed('unproven_lane');
    const ctx = contextOf(res.req);
    ctx.quiet = true;
    hold?.afterAnswer(res.req, res, ctx.clientAddress, 1);
    fail(res, 'unavailable', { 'retry-after': '1' });
  };
  /** The gateway's own 429 for an address past its budget; its connection is then held for the Retry-After. */
  const rateLimited = (req: Request, res: Response, retryAfterS: number) => {
    const ctx = contextOf(req);
    metrics.refusedAuthLimited(ctx.route);
    ctx.quiet = true;
    hold?.afterAnswer(req, res, ctx.clientAddress, retryAfterS);
    fail(res, 'rate_limited', { 'retry-after': String(retryAfterS), [LIMIT_HEADER]: String(budget!.limit) });
  };

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.use((req: Request, res: Response, next: NextFunction) => {
    const ctx = beginRequest(req, res, { logger, metrics, trustProxy: config.trustProxy });
    // Past the cap Node keeps only cap+1 fields (server.maxHeadersCount), so
    // more than `maxHeaders` here means the client sent too many: forwarded,
    // they overflowed realtime's parser, which dropped the trailing Host.
    if (req.rawHeaders.length / 2 > maxHeaders) {
      ctx.route = 'not_found';
      return fail(res, 'headers_too_large', { connection: 'close' });
    }
    // What Node's requireHostHeader did (turned off in server.ts, see there).
    if (req.httpVersion === '1.1' && req.headers.host === undefined) return fail(res, 'bad_request', { connection: 'close' });
    if (applyCors(req, res, config.corsOrigins)) {
      ctx.route = 'preflight';
      return;
    }
    // /healthz only, for a load balancer's check of this port; /readyz and /metrics are on the ops port (server.ts).
    if (handleHealth(req, res)) {
      ctx.route = 'ops';
      return;
    }
    // The health check above is exempt: a load balancer must see an overloaded gateway as alive.
    if (shedder) {
      const reason = shedder.shed();
      if (reason !== undefined) {
        metrics.shed(reason);
        ctx.quiet = true;
        const limit = reason === 'in_flight' ? config.overload?.maxInFlight : config.overload?.maxEventLoopDelayMs;
        return fail(res, 'unavailable', { 'retry-after': '1', ...(limit !== undefined && { [LIMIT_HEADER]: String(limit) }) });
      }
      res.once('close', () => shedder.done());
    }
    next();
  });

  /**
   * Host routes: past its budget an address is answered 429 here unless it
   * presents a credential the registry accepted recently; the registry's
   * refusals (401, and its own 429) count toward the budget.
   */
  const hostBudget = (req: Request, res: Response): boolean => {
    if (!budget) return true;
    const ctx = contextOf(req);
    const segment = HOST_TENANT_SEGMENT.exec(req.path)?.[1] ?? '';
    const authorization = authorizationOf(req) ?? '';
    const exhausted = budget.exhausted(ctx.clientAddress);
    if (exhausted !== undefined && !budget.credentialWasServed(segment, authorization)) {
      rateLimited(req, res, exhausted);
      return false;
    }
    res.once('finish', () => {
      if (res.statusCode === 401 || res.statusCode === 429) budget.refused(ctx.clientAddress);
      else if (res.statusCode >= 200 && res.statusCode < 300) budget.credentialServed(segment, authorization);
    });
    return true;
  };

  /**
   * A host route to the registry, with the client address it counts refusals
   * by. The body is read first (a slow upload holds no turn); a credential the
   * registry has not accepted recently then waits its turn in the unproven lane.
   */
  const forwardHost = async (req: Request, res: Response, limit: number) => {
    const ctx = contextOf(req);
    const headers = { 'x-request-id': ctx.requestId, [INTERNAL_TOKEN_HEADER]: config.internalToken, 'x-relay-client-address': ctx.clientAddress };
    const body = await readBodyOrRefuse(req, res, limit);
    if (body === undefined) return;
    const segment = HOST_TENANT_SEGMENT.exec(req.path)?.[1] ?? '';
    if (!lane || !budget || budget.credentialWasServed(segment, authorizationOf(req) ?? '')) return toRegistry(req, res, body, headers);
    try {
      await lane.admit(
        () =>
          new Promise<void>((resolve) => {
            res.once('close', resolve);
            toRegistry(req, res, body, headers);
          }),
      );
    } catch (err) {
      if (!(err instanceof LaneFullError)) throw err;
      laneFull(res);
    }
  };

  app.all(HOST_FETCH_PATH, async (req: Request, res: Response) => {
    const ctx = contextOf(req);
    ctx.route = 'host_fetch';
    if (req.method !== 'POST') return fail(res, 'method_not_allowed', { allow: 'POST' });
    if (!hostBudget(req, res)) return;
    // The registry rate-limits failed fetches (its own port is public too, so
    // the rule lives in one place); it counts them per client address, which
    // only the gateway knows, vouched for by the internal token.
    res.once('finish', () => {
      if (res.statusCode === 429) metrics.rateLimited();
    });
    await forwardHost(req, res, MAX_HOST_FETCH_BODY_BYTES);
  });

  // Same headers as the fetch (the registry's Basic check and failure rate limit serve both); the
  // registry answers methods and unknown paths itself. Client-sent x-relay-* headers are dropped by the proxy.
  app.all(HOST_API_PATH, async (req: Request, res: Response) => {
    const ctx = contextOf(req);
    ctx.route = 'host_api';
    if (declaredTooLarge(req, MAX_HOST_API_BODY_BYTES)) return refuseTooLarge(req, res);
    if (!hostBudget(req, res)) return;
    res.once('finish', () => {
      if (res.statusCode === 429) metrics.rateLimited();
    });
    await forwardHost(req, res, MAX_HOST_API_BODY_BYTES);
  });

  app.use(async (req: Request, res: Response, next: NextFunction) => {
    if (req.path !== '/api/v1' && !req.path.startsWith('/api/v1/')) return next();
    const ctx = contextOf(req);
    ctx.route = 'api_v1';
    // Cheap and reveals nothing: refuse a declared oversize body before any work
    // (then read and drop the rest, bounded, so the client reads the 413).
    if (declaredTooLarge(req, MAX_API_BODY_BYTES)) return refuseTooLarge(req, res, DATA_LIMIT_HEADERS);
    const headers: Record<string, string> = { [INTERNAL_TOKEN_HEADER]: config.internalToken, 'x-request-id': ctx.requestId };
    if (authenticate) {
      // Past its budget an address is answered 429 for every refusal, and only tokens of a
      // tenant served recently still reach the verifier (a valid client behind it keeps working).
      const exhausted = budget?.exhausted(ctx.clientAddress);
      const refuse = () => {
        if (exhausted === undefined) {
          budget?.refused(ctx.clientAddress);
          return fail(res, 'invalid_or_missing_token', INVALID_TOKEN_HEADERS);
        }
        return rateLimited(req, res, exhausted);
      };
      const token = bearerToken(authorizationOf(req));
      if (token === undefined) return refuse();
      if (exhausted !== undefined && !budget!.tokenOfServedTenant(token)) return refuse();
      let result;
      try {
        const verdict = authenticator!.check(token);
        if (verdict instanceof Promise) {
          result = await verdict;
          if (result.valid) budget?.tenantServed(result.identity.tenantId);
        } else result = verdict;
      } catch (err) {
        // The unproven lane was full (the authenticator's gate): shed, not auth_unavailable.
        if (err instanceof LaneFullError) return laneFull(res);
        ctx.log.warn({ err: (err as Error).message }, 'token check unavailable');
        return fail(res, 'auth_unavailable');
      }
      if (!result.valid) {
        // The verifier's reason code (never the token): why a client is refused is an operator's first question.
        ctx.log.info({ reason: result.reason }, 'token refused');
        return refuse();
      }
      const id = result.identity;
      ctx.tenantId = id.tenantId;
      headers['x-relay-tenant-id'] = id.tenantId;
      headers['x-relay-user-id'] = id.userId;
      headers['x-relay-expires-at'] = String(id.expiresAt);
      // The token's channel capability (issue #13); realtime decides with it. Absent: no claim.
      if (id.cap !== undefined) headers['x-relay-cap'] = capabilityJson(id.cap);
    }
    const forwarded = await forwardWithBody(req, res, MAX_API_BODY_BYTES, toRealtime, headers, DATA_LIMIT_HEADERS);
    // A body over the limit of a verified caller: the tenant's payload_size refusal (smaller ones realtime judges and counts).
    if (!forwarded && res.statusCode === 413 && ctx.tenantId !== undefined) opts.usage?.refused(ctx.tenantId, 'payload_size');
  });

  // A plain request to the WebSocket path (the upgrades go to ws-proxy, never here): PROTOCOL.md's 426.
  app.all('/ws', (req: Request, res: Response) => {
    contextOf(req).route = 'ws';
    fail(res, 'upgrade_required', { upgrade: 'websocket' });
  });

  app.use((req: Request, res: Response) => fail(res, 'not_found'));

  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    contextOf(req).log.error({ err }, 'unhandled error');
    fail(res, 'internal');
  });
  return app;
}

async function forwardWithBody(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  forward: ForwardFn,
  headers: Record<string, string>,
  refusalHeaders?: Readonly<Record<string, string>>,
): Promise<boolean> {
  const body = await readBodyOrRefuse(req, res, limit, { ...(refusalHeaders && { refusalHeaders }) });
  if (body === undefined) return false;
  forward(req, res, body, headers);
  return true;
}

/** The gateway's error answer: when the request body was not read, the connection is closed after it. */
function fail(res: ServerResponse, code: ErrorCode, headers: Record<string, string> = {}): void {
  sendError(res, code, headers, { closeIfUnread: true });
}
