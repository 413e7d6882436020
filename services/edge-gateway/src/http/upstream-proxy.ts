import { Agent, request, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Logger } from '@service-relay/core';
import { INTERNAL_TOKEN_HEADER, sendError } from '@service-relay/edge';
import type { GatewayMetrics } from '../metrics';
import { logOf } from './request-context';

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
  /**
   * Requests that only read, whatever their method (the host-sync fetch is a
   * POST): sent again once after any reset, so a registry replica dying
   * mid-request costs the host nothing when another answers.
   */
  safeToRepeat?: (req: IncomingMessage) => boolean;
  logger: Logger;
  metrics: GatewayMetrics;
}

export type ForwardFn = (req: IncomingMessage, res: ServerResponse, body: Buffer, headers: Record<string, string>) => void;

interface InFlight {
  timer: NodeJS.Timeout;
  timedOut: boolean;
  proxyReq?: ClientRequest;
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
function sendAgain(err: NodeJS.ErrnoException, req: IncomingMessage, proxyReq: ClientRequest | undefined, safeToRepeat?: (req: IncomingMessage) => boolean): boolean {
  if (err.code === 'ECONNREFUSED') return true;
  if (err.code !== 'ECONNRESET' && err.code !== 'EPIPE') return false;
  if (safeToRepeat?.(req)) return true;
  if (!proxyReq?.reusedSocket) return false;
  return req.method === 'GET' || req.method === 'HEAD' || req.headers['idempotency-key'] !== undefined;
}

/**
 * Forwards an already-read body to one upstream over a keep-alive agent.
 *
 * Written on node:http rather than http-proxy-middleware, by measurement
 * (issue #15, `npm run bench -- --only=gateway`, bench/README.md "An earlier Intel Xeon table"):
 * profiled back to back on one machine, the gateway process spent 344
 * CPU-µs per authenticated request through http-proxy-middleware (per-request
 * option merging, URL joins, the web-incoming and web-outgoing passes setting
 * response headers one by one, two stream pipes) and 205 through this;
 * unprofiled, 184–191 against 261–278 for the express + jose +
 * http-proxy-middleware monolith. Here the request goes out with its headers
 * as one flat list and the answer comes back with one writeHead. The rules are the
 * ones the middleware was configured for: the Host of the target, the
 * upstream's hop-by-hop headers dropped, our X-Request-Id kept, the upstream
 * answer cut off when the client goes away.
 */
export function createUpstreamProxy(opts: UpstreamProxyOptions): ForwardFn {
  const targets = new Map<string, Target>();
  const targetOf = (url: string): Target => {
    let t = targets.get(url);
    if (!t) targets.set(url, (t = parseTarget(url)));
    return t;
  };
  // A request sent again goes over a new connection: the other kept-alive
  // connections in the pool may lead to the same stopping upstream (behind a
  // Service every pooled connection may be pinned to one pod).
  const fresh = new Agent({ keepAlive: false });

  return (req, res, body, headers) => {
    rewriteHeaders(req, body, headers, opts.stripAuthorization);
    const state: InFlight = {
      timedOut: false,
      timer: setTimeout(() => {
        state.timedOut = true;
        opts.metrics.upstreamError(opts.name, 'timeout');
        logOf(req, opts.logger).warn({ upstream: opts.name, timeout_ms: opts.timeoutMs }, 'upstream did not answer in time');
        state.proxyReq?.destroy();
        sendError(res, 'upstream_timeout', {}, CLOSE_IF_UNREAD);
      }, opts.timeoutMs),
    };
    res.once('close', () => {
      clearTimeout(state.timer);
      // The client went away before the answer: the upstream request is abandoned.
      if (!res.writableFinished) state.proxyReq?.destroy();
    });

    const send = (agent: Agent, retry: boolean) => {
      const target = targetOf(opts.router ? opts.router() : opts.target);
      let proxyReq: ClientRequest;
      try {
        proxyReq = request({ agent, host: target.hostname, port: target.port, method: req.method, path: req.url, headers: outgoingHeaders(req, target.host) });
      } catch (err) {
        // Nothing a client sends may throw past this point unanswered (Node's
        // client refuses a few request-target bytes its server accepts).
        clearTimeout(state.timer);
        logOf(req, opts.logger).warn({ upstream: opts.name, err: (err as Error).message }, 'could not forward the request');
        sendError(res, 'bad_request', {}, CLOSE_IF_UNREAD);
        return;
      }
      state.proxyReq = proxyReq;
      proxyReq.on('response', (proxyRes) => {
        clearTimeout(state.timer);
        if (state.timedOut || res.headersSent || res.destroyed) {
          proxyRes.destroy();
          return;
        }
        try {
          res.writeHead(proxyRes.statusCode ?? 502, responseHeaders(proxyRes.rawHeaders));
        } catch (err) {
          // Node's parser already refused what writeHead would; still, nothing may throw past here unanswered.
          proxyRes.destroy();
          logOf(req, opts.logger).warn({ upstream: opts.name, err: (err as Error).message }, 'upstream answer could not be passed on');
          sendError(res, 'upstream_unavailable', {}, CLOSE_IF_UNREAD);
          return;
        }
        proxyRes.on('error', () => res.destroy());
        proxyRes.pipe(res);
      });
      proxyReq.on('error', (err: NodeJS.ErrnoException) => {
        if (state.timedOut || res.writableEnded || res.destroyed) return;
        if (retry && !res.headersSent && sendAgain(err, req, proxyReq, opts.safeToRepeat)) {
          state.proxyReq = undefined;
          logOf(req, opts.logger).info({ upstream: opts.name, code: err.code }, 'upstream request failed before it was processed; sent again');
          send(fresh, false);
          return;
        }
        clearTimeout(state.timer);
        // Refused, reset, unresolvable: the upstream is not there (502). A
        // connect timeout is the one socket error that means "too slow" (504).
        const kind = err.code === 'ETIMEDOUT' ? 'timeout' : 'unavailable';
        opts.metrics.upstreamError(opts.name, kind);
        logOf(req, opts.logger).warn({ upstream: opts.name, code: err.code ?? err.message }, 'upstream request failed');
        sendError(res, kind === 'timeout' ? 'upstream_timeout' : 'upstream_unavailable', {}, CLOSE_IF_UNREAD);
      });
      proxyReq.end(body.length > 0 ? body : undefined);
    };
    send(opts.agent, true);
  };
}

interface Target {
  hostname: string;
  port: number;
  /** The Host header the upstream gets. */
  host: string;
}

function parseTarget(url: string): Target {
  const u = new URL(url);
  if (u.protocol !== 'http:') throw new Error(`upstream ${url}: only http: upstreams are supported`);
  // URL keeps IPv6 literals bracketed; the socket wants them bare.
  return { hostname: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(u.port || 80), host: u.host };
}

/** The request's (already rewritten) headers as one flat list, Host naming the upstream. */
function outgoingHeaders(req: IncomingMessage, host: string): string[] {
  const out = ['host', host];
  const h = req.headers;
  for (const name in h) {
    if (name === 'host') continue;
    const value = h[name];
    if (value === undefined) continue;
    if (typeof value === 'string') out.push(name, value);
    else for (const v of value) out.push(name, v);
  }
  return out;
}

/**
 * The upstream's answer headers for the client, as one flat list: its
 * connection headers describe our keep-alive link to it, not the client's
 * (copied through, `connection: keep-alive` overrode a client's `Connection:
 * close`; Node decides the client's connection from the client's request),
 * and Node frames the body for the client itself. The X-Request-Id we
 * logged (already set on the response) wins over whatever the upstream echoes.
 */
function responseHeaders(raw: readonly string[]): string[] {
  let listed: string[] | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') (listed ??= []).push(...connectionListed(raw[i + 1]));
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (RESPONSE_DROPPED.has(name) || name.startsWith('proxy-') || listed?.includes(name)) continue;
    out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
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
    if (name.startsWith('x-relay-') || name === INTERNAL_TOKEN_HEADER) delete h[name];
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
// Node frames the client's answer itself; x-request-id is ours (set before forwarding).
const RESPONSE_DROPPED = new Set(['connection', 'keep-alive', 'te', 'trailer', 'upgrade', 'transfer-encoding', 'x-request-id']);

/** Removes hop-by-hop headers, `proxy-*` and whatever `connection` lists. */
function dropHopByHop(h: Record<string, unknown>, names: ReadonlySet<string>): void {
  const listed = connectionListed(h.connection);
  for (const name of Object.keys(h)) {
    if (names.has(name) || name.startsWith('proxy-') || listed.includes(name)) delete h[name];
  }
}

/** The header names a `Connection` value lists (they are hop-by-hop too). */
function connectionListed(value: unknown): string[] {
  return typeof value === 'string' ? value.toLowerCase().split(',').map((n) => n.trim()) : [];
}
