import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Duplex } from 'node:stream';
import { httpStatusFor, redactUrl, type ErrorCode, type Logger } from '@service-relay/core';
import { INTERNAL_TOKEN_HEADER, rawErrorResponse, requestIdOf } from '@service-relay/edge';
import type { GatewayMetrics } from '../metrics';
import { clientAddress } from './request-context';
import type { UpstreamPool } from './upstream-pool';
import { closeFrame, FrameBoundary } from './ws-frames';

/** Realtime's own `upgrade` listener, in this process: it answers the handshake on the client's socket. */
export type WsHandoff = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface WsProxyOptions {
  /** Realtime instances; each upgrade goes to the next one. */
  realtime: UpstreamPool;
  /**
   * Set when realtime runs in this process: after the edge checks, an upgrade
   * is handed to it instead of piped (no second socket, no copy of every
   * frame). Realtime then answers it, logs refusals and counts it.
   */
  handoff?: WsHandoff;
  /** The upstream must answer the handshake within this (UPSTREAM_TIMEOUT_MS), else 504. */
  timeoutMs: number;
  maxRequestHeaders: number;
  trustProxy: boolean;
  logger: Logger;
  metrics: GatewayMetrics;
}

/** The only path upgraded: realtime's. */
const WS_PATH = '/ws';
/** A refused upgrade's body (realtime's JSON error) is small; more is not an answer we pass on. */
const MAX_REFUSAL_BODY = 16 * 1024;
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate']);

/**
 * The gateway's `upgrade` listener: WebSocket upgrades on `/ws` are forwarded
 * to realtime, which verifies the token (header or `access_token`) exactly
 * as when it is reached directly. The same edge rules as for HTTP apply
 * (header count, Host, client-sent identity headers dropped, hop-by-hop
 * headers dropped); the URL is logged redacted, never the token. A refused
 * upgrade (401, 503, …) is passed back as realtime answered it.
 */
export interface WsProxy {
  /** The server's `upgrade` listener; settles once the upgrade is answered or spliced. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void>;
  /**
   * Closes every proxied WebSocket with 1001 (reconnect at once, to another
   * gateway), each at its next frame boundary and within a second. Without
   * it a server's close() would wait for upgraded sockets forever.
   */
  closeAll(): void;
}

export function createWsProxy(opts: WsProxyOptions): WsProxy {
  const open = new Set<{ goAway(): void }>();
  const handle = (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    new Promise<void>((resolve) => {
      socket.on('error', () => {});
      const started = performance.now();
      const requestId = requestIdOf(req.headers['x-request-id']);
      const logger = opts.logger.child({ request_id: requestId });
      const log = (status: number, upstream?: string) => {
        const ms = performance.now() - started;
        opts.metrics.request('ws', status, ms / 1000);
        logger.info(
          { method: req.method, path: redactUrl(req.url ?? ''), route: 'ws', status, upstream, duration_ms: Math.round(ms * 100) / 100, client: clientAddress(req, opts.trustProxy) },
          'upgrade',
        );
      };
      const refuse = (code: ErrorCode, extra = '') => {
        socket.end(rawErrorResponse(code, `X-Request-Id: ${requestId}\r\n${extra}`));
        setTimeout(() => socket.destroy(), 1000).unref();
        log(httpStatusFor(code));
        resolve();
      };
      // Node keeps at most maxHeadersCount (cap + 1) fields: more than the cap means the client sent too many.
      if (req.rawHeaders.length / 2 > opts.maxRequestHeaders) return refuse('headers_too_large');
      if (req.httpVersion === '1.1' && req.headers.host === undefined) return refuse('bad_request');
      if ((req.url ?? '').split('?', 1)[0] !== WS_PATH) return refuse('not_found');

      if (opts.handoff) {
        handOver(req, requestId);
        opts.handoff(req, socket, head);
        opts.metrics.upgradeHandedOff();
        return resolve();
      }
      const headers = forwardedHeaders(req, requestId);
      const attempt = (tried: number) => {
        const target = new URL(opts.realtime.next());
        const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
        const proxyReq = send({ protocol: target.protocol, hostname: target.hostname, port: target.port, method: 'GET', path: req.url, headers: { ...headers, host: target.host }, agent: false });
        let settled = false;
        const timer = setTimeout(() => {
          if (settled) return;
          settled = true;
          proxyReq.destroy();
          opts.metrics.upstreamError('realtime', 'timeout');
          logger.warn({ upstream: 'realtime', timeout_ms: opts.timeoutMs }, 'upstream did not answer the upgrade in time');
          refuse('upstream_timeout');
        }, opts.timeoutMs);
        const done = () => {
          settled = true;
          clearTimeout(timer);
        };
        proxyReq.on('error', (err: NodeJS.ErrnoException) => {
          if (settled) return;
          done();
          // Nothing was sent yet: another instance may take it (one stopped realtime must not cost its share of upgrades).
          if (err.code === 'ECONNREFUSED' && tried + 1 < opts.realtime.size && !socket.destroyed) return attempt(tried + 1);
          opts.metrics.upstreamError('realtime', 'unavailable');
          logger.warn({ upstream: 'realtime', code: err.code ?? err.message }, 'upgrade could not reach realtime');
          refuse('upstream_unavailable');
        });
        proxyReq.on('response', (res) => {
          if (settled) return;
          done();
          passRefusal(res, socket, requestId);
          log(res.statusCode ?? 0, target.host);
          resolve();
        });
        proxyReq.on('upgrade', (res, upstream, upstreamHead) => {
          if (settled) return upstream.destroy();
          done();
          if (socket.destroyed) {
            upstream.destroy();
            return resolve();
          }
          socket.write(switchingProtocols(res, requestId));
          if (upstreamHead.length > 0) socket.write(upstreamHead);
          if (head.length > 0) upstream.write(head);
          const spliced = splice(socket, upstream, upstreamHead);
          open.add(spliced);
          opts.metrics.websocketOpened();
          socket.once('close', () => {
            open.delete(spliced);
            opts.metrics.websocketClosed();
          });
          log(101, target.host);
          resolve();
        });
        socket.once('close', () => {
          if (!settled) {
            done();
            proxyReq.destroy();
            resolve();
          }
        });
        proxyReq.end();
      };
      attempt(0);
    });
  return {
    handle,
    closeAll: () => {
      for (const spliced of open) spliced.goAway();
      open.clear();
    },
  };
}

/**
 * The client's headers for realtime: identity headers only the gateway may
 * set are dropped (realtime ignores them on upgrades, but they must never
 * pass), and so are hop-by-hop ones and whatever `Connection` lists; the
 * upgrade itself is restated. Authorization passes: realtime verifies it.
 */
function forwardedHeaders(req: IncomingMessage, requestId: string): OutgoingHttpHeaders {
  const listed = new Set((req.headers.connection ?? '').toLowerCase().split(',').map((s) => s.trim()));
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name) || name.startsWith('proxy-')) continue;
    if (name.startsWith('x-relay-') || name === INTERNAL_TOKEN_HEADER || name === 'host') continue;
    out[name] = value;
  }
  out.connection = 'Upgrade';
  out.upgrade = req.headers.upgrade ?? 'websocket';
  out['x-request-id'] = requestId;
  return out;
}

/** The same edge rules as forwardedHeaders, applied in place for a handoff: realtime reads these very headers. */
function handOver(req: IncomingMessage, requestId: string): void {
  for (const name of Object.keys(req.headers)) {
    if (name.startsWith('x-relay-') || name === INTERNAL_TOKEN_HEADER) delete req.headers[name];
  }
  req.headers['x-request-id'] = requestId;
}

function switchingProtocols(res: IncomingMessage, requestId: string): string {
  const lines = ['HTTP/1.1 101 Switching Protocols'];
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i]!;
    if (name.toLowerCase() === 'x-request-id') continue;
    lines.push(`${name}: ${res.rawHeaders[i + 1]}`);
  }
  lines.push(`X-Request-Id: ${requestId}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Realtime refused the upgrade: its status, headers and JSON body go back, and the connection closes. */
function passRefusal(res: IncomingMessage, socket: Duplex, requestId: string): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (c: Buffer) => {
    size += c.length;
    if (size > MAX_REFUSAL_BODY) {
      res.destroy();
      socket.destroy();
      return;
    }
    chunks.push(c);
  });
  res.on('error', () => socket.destroy());
  res.on('end', () => {
    const body = Buffer.concat(chunks);
    const lines = [`HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}`.trimEnd()];
    for (let i = 0; i < res.rawHeaders.length; i += 2) {
      const name = res.rawHeaders[i]!.toLowerCase();
      if (HOP_BY_HOP.has(name) || name === 'content-length' || name === 'x-request-id') continue;
      lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
    }
    lines.push(`Content-Length: ${body.length}`, `X-Request-Id: ${requestId}`, 'Connection: close');
    socket.end(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`), body]));
    setTimeout(() => socket.destroy(), 1000).unref();
  });
}

/** Bytes both ways until either side ends; an error or close on one side ends the other. */
/** The longest a stopping gateway waits for realtime to finish the frame in progress before cutting a WebSocket. */
const GO_AWAY_MS = 1000;
const GOING_AWAY = closeFrame(1001, 'gateway stopping');

/**
 * Pipes an upgraded pair both ways, byte for byte, and follows where
 * realtime's frames end (FrameBoundary reads only their headers). `goAway`
 * ends the client's side with a close frame of its own (1001: reconnect at
 * once, elsewhere) at the next frame boundary, at most GO_AWAY_MS later, and
 * drops realtime's side, which then cleans up as for any closed connection.
 */
function splice(client: Duplex, upstream: Duplex, upstreamHead: Buffer): { goAway(): void } {
  (upstream as Duplex & { setNoDelay?: (v: boolean) => void }).setNoDelay?.(true);
  (client as Duplex & { setNoDelay?: (v: boolean) => void }).setNoDelay?.(true);
  (client as Duplex & { setTimeout?: (ms: number) => void }).setTimeout?.(0);
  const frames = new FrameBoundary();
  frames.advance(upstreamHead);
  const cutClient = () => client.destroy();
  upstream.on('error', cutClient);
  client.on('error', () => upstream.destroy());
  upstream.on('close', cutClient);
  client.on('close', () => upstream.destroy());
  // After pipe's own listener: each chunk is counted once it was handed to the client.
  const follow = (chunk: Buffer) => frames.advance(chunk);
  upstream.pipe(client);
  upstream.on('data', follow);
  client.pipe(upstream);
  return {
    goAway() {
      if (client.destroyed) return;
      upstream.unpipe(client);
      client.unpipe(upstream);
      upstream.off('data', follow);
      upstream.off('close', cutClient);
      upstream.off('error', cutClient);
      const timer = setTimeout(cutClient, GO_AWAY_MS);
      timer.unref();
      const finish = () => {
        upstream.off('data', rest);
        upstream.destroy();
        client.end(GOING_AWAY);
        client.once('close', () => clearTimeout(timer));
      };
      // The frame in progress, if any, is finished first: a close frame in its middle would corrupt the stream.
      const rest = (chunk: Buffer) => {
        const taken = frames.advance(chunk, true);
        client.write(taken === chunk.length ? chunk : chunk.subarray(0, taken));
        if (frames.atBoundary) finish();
      };
      if (frames.atBoundary) return finish();
      upstream.on('data', rest);
      upstream.once('close', cutClient);
      upstream.resume();
    },
  };
}
