import { Agent, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { sendError, type Logger } from '@service-relay/core';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { GatewayMetrics } from '../metrics';

/** The gateway's rule: an answer to a request whose body was not read closes the connection. */
const CLOSE_IF_UNREAD = { closeIfUnread: true } as const;

export interface UpstreamProxyOptions {
  /** Label for logs and metrics. */
  name: string;
  target: string;
  /** Picks the target per request (several realtime instances); default: always `target`. */
  router?: () => string;
  agent: Agent;
  timeoutMs: number;
  /** Drop the client's Authorization (the bearer token must not reach realtime; the registry needs Basic). */
  stripAuthorization: boolean;
  logger: Logger;
  metrics: GatewayMetrics;
}

export type ForwardFn = (req: IncomingMessage, res: ServerResponse, body: Buffer, headers: Record<string, string>) => void;

interface InFlight {
  body: Buffer;
  timer: NodeJS.Timeout;
  timedOut: boolean;
  proxyReq?: ClientRequest;
  /** Sends the request again (once; see sendAgain). */
  retry?: () => void;
}

/**
 * Whether a failed upstream request may be sent again, once: the connection
 * was refused (nothing was sent; the next upstream of a list is tried), or
 * a kept-alive connection was reset as the request went out on it, which is
 * how an upstream that is stopping (closing its idle connections) or a
 * connection that timed out races a new request. That request was not
 * processed, but a reset may also come from an upstream that died while
 * processing, so only requests that are safe to repeat are sent again: GET
 * and HEAD, and those with an Idempotency-Key.
 */
function sendAgain(err: NodeJS.ErrnoException, req: IncomingMessage, proxyReq: ClientRequest | undefined): boolean {
  if (err.code === 'ECONNREFUSED') return true;
  if ((err.code !== 'ECONNRESET' && err.code !== 'EPIPE') || !proxyReq?.reusedSocket) return false;
  return req.method === 'GET' || req.method === 'HEAD' || req.headers['idempotency-key'] !== undefined;
}

/**
 * Forwards an already-read body to one upstream through http-proxy-middleware
 * with a keep-alive agent. The default plugins are ejected: their error page
 * is HTML-ish text and their logger writes a line per request.
 */
export function createUpstreamProxy(opts: UpstreamProxyOptions): ForwardFn {
  const inFlight = new WeakMap<IncomingMessage, InFlight>();
  const proxyThrough = (agent: Agent) => createProxyMiddleware<IncomingMessage, ServerResponse>({
    target: opts.target,
    ...(opts.router && { router: opts.router }),
    agent,
    changeOrigin: true,
    ejectPlugins: true,
    plugins: [
      (proxy) => {
        proxy.on('proxyReq', (proxyReq, req, res) => {
          const state = inFlight.get(req);
          if (!state) return;
          if (state.timedOut) {
            proxyReq.destroy();
            return;
          }
          state.proxyReq = proxyReq;
          // The incoming stream is already consumed, so http-proxy's pipe only ends
          // proxyReq; the buffered body goes first (headers are still unsent here).
          if (state.body.length > 0) {
            try {
              proxyReq.write(state.body);
            } catch (err) {
              // Nothing a client sends may throw past this point unanswered.
              opts.logger.warn({ upstream: opts.name, err: (err as Error).message }, 'could not forward the request body');
              proxyReq.destroy();
              clearTimeout(state.timer);
              sendError(res, 'invalid_body', {}, CLOSE_IF_UNREAD);
            }
          }
        });
        proxy.on('proxyRes', (proxyRes, req, res) => {
          const state = inFlight.get(req);
          if (state) clearTimeout(state.timer);
          // The id we logged wins over whatever the upstream echoes.
          const id = res.getHeader('x-request-id');
          if (typeof id === 'string') proxyRes.headers['x-request-id'] = id;
          // The upstream's connection headers describe our keep-alive link to
          // it, not the client's: copied through, `connection: keep-alive`
          // overrode a client's `Connection: close`. Node decides the
          // client's connection from the client's request.
          dropHopByHop(proxyRes.headers, RESPONSE_HOP_BY_HOP);
          // Set here, or http-proxy fills in `keep-alive` from the request
          // header we already removed.
          proxyRes.headers.connection = res.shouldKeepAlive ? 'keep-alive' : 'close';
          res.once('close', () => {
            if (!res.writableFinished) proxyRes.destroy();
          });
        });
        proxy.on('error', (err: NodeJS.ErrnoException, req, res) => {
          const state = inFlight.get(req);
          if (state?.timedOut || !isResponse(res)) return;
          if (state?.retry && !res.headersSent && sendAgain(err, req, state.proxyReq)) {
            const retry = state.retry;
            state.retry = undefined;
            state.proxyReq = undefined;
            opts.logger.info({ upstream: opts.name, code: err.code }, 'upstream request failed before it was processed; sent again');
            retry();
            return;
          }
          if (state) clearTimeout(state.timer);
          // Refused, reset, unresolvable: the upstream is not there (502). A
          // connect timeout is the one socket error that means "too slow" (504).
          const kind = err.code === 'ETIMEDOUT' ? 'timeout' : 'unavailable';
          opts.metrics.upstreamError(opts.name, kind);
          opts.logger.warn({ upstream: opts.name, code: err.code ?? err.message }, 'upstream request failed');
          sendError(res, kind === 'timeout' ? 'upstream_timeout' : 'upstream_unavailable', {}, CLOSE_IF_UNREAD);
        });
        proxy.on('econnreset', () => {});
      },
    ],
  });
  const middleware = proxyThrough(opts.agent);
  // A request sent again goes over a new connection: the other kept-alive
  // connections in the pool may lead to the same stopping upstream (behind a
  // Service every pooled connection may be pinned to one pod).
  const fresh = proxyThrough(new Agent({ keepAlive: false }));

  return (req, res, body, headers) => {
    rewriteHeaders(req, body, headers, opts.stripAuthorization);
    const state: InFlight = {
      body,
      timedOut: false,
      timer: setTimeout(() => {
        state.timedOut = true;
        opts.metrics.upstreamError(opts.name, 'timeout');
        opts.logger.warn({ upstream: opts.name, timeout_ms: opts.timeoutMs }, 'upstream did not answer in time');
        state.proxyReq?.destroy();
        sendError(res, 'upstream_timeout', {}, CLOSE_IF_UNREAD);
      }, opts.timeoutMs),
    };
    inFlight.set(req, state);
    res.once('close', () => clearTimeout(state.timer));
    const failed = (err: unknown) => {
      clearTimeout(state.timer);
      opts.logger.error({ err }, 'proxy middleware failed');
      sendError(res, 'internal', {}, CLOSE_IF_UNREAD);
    };
    const send = (through: typeof middleware) => {
      try {
        through(req, res, failed).catch(failed);
      } catch (err) {
        failed(err);
      }
    };
    state.retry = () => send(fresh);
    send(middleware);
  };
}

/**
 * Identity comes only from the gateway: every client-sent x-relay-* and
 * x-internal-token header is removed before ours are added. Done on
 * req.headers (which http-proxy copies) rather than in a proxyReq hook,
 * because http-proxy skips that hook for requests carrying `Expect`.
 */
function rewriteHeaders(req: IncomingMessage, body: Buffer, add: Record<string, string>, stripAuthorization: boolean): void {
  const h = req.headers;
  const sized = h['transfer-encoding'] !== undefined || h['content-length'] !== undefined;
  // Hop-by-hop headers describe the client's connection, not the request
  // (RFC 9110 7.6.1): forwarded onto our sized body, a client's `Trailer`
  // made Node throw ERR_HTTP_TRAILER_INVALID outside any handler and took
  // the process down. `connection` may name more of them.
  for (const name of Object.keys(h)) {
    if (name.startsWith('x-relay-') || name === 'x-internal-token') delete h[name];
  }
  dropHopByHop(h, HOP_BY_HOP);
  if (stripAuthorization) delete h.authorization;
  // The body was read here already: no 100-continue dance upstream, and a
  // chunked upload goes on as one sized body.
  delete h.expect;
  if (sized) h['content-length'] = String(body.length);
  Object.assign(h, add);
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'transfer-encoding']);
// http-proxy frames the response body itself (transfer-encoding stays its business).
const RESPONSE_HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'upgrade']);

/** Removes hop-by-hop headers, `proxy-*` and whatever `connection` lists. */
function dropHopByHop(h: Record<string, unknown>, names: ReadonlySet<string>): void {
  const listed = typeof h.connection === 'string' ? h.connection.toLowerCase().split(',').map((n) => n.trim()) : [];
  for (const name of Object.keys(h)) {
    if (names.has(name) || name.startsWith('proxy-') || listed.includes(name)) delete h[name];
  }
}

function isResponse(res: unknown): res is ServerResponse {
  return typeof (res as ServerResponse | undefined)?.writeHead === 'function';
}
