import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import { ConfigError, errorBody, httpStatusFor, type EnvReader, type ErrorCode, type Logger } from '@service-relay/core';
import { LIMIT_HEADER } from './body-limits';

export interface ConnectionLimits {
  /** A connection that has not completed its first request head within this is closed. */
  firstByteTimeoutMs: number;
  /** Open connections (upgraded WebSockets included) across all addresses. */
  maxConnections: number;
  /** Open connections from one client address. */
  maxPerAddress: number;
}

/**
 * Defaults, chosen for one process on a stock host:
 * - 10 s: a real client sends its request right after connecting; a socket
 *   that says nothing for 10 s is an attack or a dead peer.
 * - 19 000 in all: under the common 20 000 open-file soft limit used for such
 *   services, leaving room for upstream sockets, Redis, gRPC and the journal.
 * - 1 000 per address: a large office behind one NAT fits, while one host
 *   cannot take more than ~5% of the process.
 */
export const DEFAULT_CONNECTION_LIMITS: Readonly<ConnectionLimits> = Object.freeze({
  firstByteTimeoutMs: 10_000,
  maxConnections: 19_000,
  maxPerAddress: 1_000,
});

export function readConnectionLimits(r: EnvReader): ConnectionLimits {
  const limits = {
    firstByteTimeoutMs: r.int('FIRST_BYTE_TIMEOUT_MS', DEFAULT_CONNECTION_LIMITS.firstByteTimeoutMs, 100, 600_000),
    maxConnections: r.int('MAX_CONNECTIONS', DEFAULT_CONNECTION_LIMITS.maxConnections, 1, 10_000_000),
    maxPerAddress: r.int('MAX_CONNECTIONS_PER_ADDRESS', DEFAULT_CONNECTION_LIMITS.maxPerAddress, 1, 10_000_000),
  };
  // Unset, the per-address default follows a smaller total; set, a contradiction stops the process.
  if (r.raw('MAX_CONNECTIONS_PER_ADDRESS') === undefined) limits.maxPerAddress = Math.min(limits.maxPerAddress, limits.maxConnections);
  if (limits.maxPerAddress > limits.maxConnections) {
    throw new ConfigError('MAX_CONNECTIONS_PER_ADDRESS', `must not exceed MAX_CONNECTIONS (${limits.maxConnections})`);
  }
  return limits;
}

export interface ConnectionGuard {
  /** Open connections now (for metrics and tests). */
  readonly open: number;
  /** Connections refused by a cap, and silent ones closed, since start. */
  readonly refused: number;
  readonly timedOut: number;
}

/** A whole HTTP/1.1 answer with the contract's error body, for writing straight to a socket. */
function rawAnswer(code: ErrorCode, reason: string, extra = ''): Buffer {
  const body = errorBody(code);
  return Buffer.from(
    `HTTP/1.1 ${httpStatusFor(code)} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
      `${extra}connection: close\r\n\r\n${body}`,
  );
}

// Written straight to the socket: the HTTP parser never sees a refused connection.
// The cap that refused it is named by its number (docs/API.md "Limits").
const refusal = (cap: number) => rawAnswer('unavailable', 'Service Unavailable', `retry-after: 1\r\n${LIMIT_HEADER}: ${cap}\r\n`);
const HEADERS_TOO_LARGE = rawAnswer('headers_too_large', 'Request Header Fields Too Large');
const BAD_REQUEST = rawAnswer('bad_request', 'Bad Request');

const started = Symbol('request-started');
const firstByteTimer = Symbol('first-byte-timer');
type Tracked = Socket & { [started]?: boolean; [firstByteTimer]?: NodeJS.Timeout | undefined };

/**
 * Caps and idle rules for a public HTTP listener (WebSocket upgrades included,
 * as they keep their socket). Node's own header timer only starts at the first
 * byte, so a socket that never sends one was held forever; here every
 * connection must complete a request head within `firstByteTimeoutMs`. Between
 * keep-alive requests Node's keepAliveTimeout applies (5 s by default, lowered
 * to the first-byte timeout when that is smaller).
 *
 * Must be called before the server listens. It takes over the server's
 * `connection` listeners, so a refused socket is answered and closed before
 * any parser is attached and no request on it ever reaches a handler.
 */
export function guardConnections(server: Server, limits: ConnectionLimits, logger?: Logger): ConnectionGuard {
  const perAddress = new Map<string, number>();
  let open = 0;
  let refused = 0;
  let timedOut = 0;
  let lastRefusalLog = 0;
  const overTotal = refusal(limits.maxConnections);
  const overAddress = refusal(limits.maxPerAddress);
  server.keepAliveTimeout = Math.min(server.keepAliveTimeout, limits.firstByteTimeoutMs);
  server.headersTimeout = Math.min(server.headersTimeout, Math.max(limits.firstByteTimeoutMs, server.keepAliveTimeout + 1000));

  const markStarted = (req: IncomingMessage) => {
    const socket = req.socket as Tracked;
    socket[started] = true;
    // Not kept for the socket's life: a WebSocket would otherwise hold it until it fires.
    clearTimeout(socket[firstByteTimer]);
    socket[firstByteTimer] = undefined;
  };
  server.prependListener('request', markStarted);
  server.prependListener('upgrade', markStarted);

  const inner = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Tracked) => {
    const address = socket.remoteAddress ?? 'unknown';
    const fromAddress = perAddress.get(address) ?? 0;
    if (open >= limits.maxConnections || fromAddress >= limits.maxPerAddress) {
      refused++;
      const now = Date.now();
      // One line a second at most: a flood of refusals must not become a flood of logs.
      if (now - lastRefusalLog > 1000) {
        lastRefusalLog = now;
        logger?.warn({ open, from_address: fromAddress, refused }, 'connection refused: connection cap reached');
      }
      socket.on('error', () => {});
      socket.end(open >= limits.maxConnections ? overTotal : overAddress);
      setTimeout(() => socket.destroy(), 1000).unref();
      return;
    }
    open++;
    perAddress.set(address, fromAddress + 1);
    const timer = setTimeout(() => {
      if (socket[started]) return;
      timedOut++;
      socket.destroy();
    }, limits.firstByteTimeoutMs);
    timer.unref();
    socket[firstByteTimer] = timer;
    // 'close' comes once; `on` spares the once-wrapper each open socket would keep.
    socket.on('close', () => {
      clearTimeout(socket[firstByteTimer]);
      open--;
      const n = (perAddress.get(address) ?? 1) - 1;
      if (n <= 0) perAddress.delete(address);
      else perAddress.set(address, n);
    });
    for (const listener of inner) listener.call(server, socket);
  });

  // Node's own answers to unparseable requests are bare status lines; clients get the contract's JSON instead.
  // Like Node's default handler, a framing error after the head (a bad chunk
  // size, an unknown Transfer-Encoding) is still answered while no response
  // has started; only a started response is cut.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket & { _httpMessage?: { headersSent?: boolean } }) => {
    if (!socket.writable || socket._httpMessage?.headersSent || err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.destroy();
      return;
    }
    socket.end(err.code === 'HPE_HEADER_OVERFLOW' ? HEADERS_TOO_LARGE : BAD_REQUEST);
  });

  return {
    get open() {
      return open;
    },
    get refused() {
      return refused;
    },
    get timedOut() {
      return timedOut;
    },
  };
}
