import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';

/**
 * An unmasked, final WebSocket text frame (header and payload in one Buffer),
 * as a server sends it. Server frames carry no mask, so the same bytes suit
 * every subscriber of a topic.
 */
export function serverTextFrame(payload: Buffer): Buffer {
  const n = payload.length;
  const headerBytes = n < 126 ? 2 : n < 65_536 ? 4 : 10;
  const out = Buffer.allocUnsafe(headerBytes + n);
  out[0] = 0x81; // FIN + text
  if (n < 126) out[1] = n;
  else if (n < 65_536) {
    out[1] = 126;
    out.writeUInt16BE(n, 2);
  } else {
    out[1] = 127;
    out.writeUInt32BE(Math.floor(n / 2 ** 32), 2);
    out.writeUInt32BE(n >>> 0, 6);
  }
  payload.copy(out, headerBytes);
  return out;
}

// A fan-out hands the same payload Buffer to every subscriber in a row, so
// remembering the last one frames each message once per process.
let lastPayload: Buffer | undefined;
let lastFrame: Buffer | undefined;

function sharedTextFrame(payload: Buffer): Buffer {
  if (payload !== lastPayload) {
    lastFrame = serverTextFrame(payload);
    lastPayload = payload;
  }
  return lastFrame!;
}

interface WsInternals {
  readyState: number;
  _socket?: Socket;
  _sender?: { _state?: number; _queue?: unknown[] };
}

/** The socket under a ws WebSocket (ws keeps it private): corked, written to and ended directly here. */
export function socketOf(ws: WebSocket): Socket | undefined {
  return (ws as unknown as WsInternals)._socket;
}

/**
 * Writes `payload` as one text frame straight to the socket: ws's own send
 * builds a header per socket and writes header and payload as two chunks,
 * which at fan-out rates doubles the writev entries and the stream
 * bookkeeping. Only when ws has nothing of its own in flight (its sender idle
 * with an empty queue, so order is kept; this server never compresses);
 * false means the caller sends through ws. bufferedAmount still counts the
 * bytes, since ws reads it from the socket.
 */
export function writeTextFrame(ws: WebSocket, payload: Buffer): boolean {
  const w = ws as unknown as WsInternals;
  const sender = w._sender;
  if (w.readyState !== 1 || !w._socket || sender?._state !== 0 || sender._queue?.length !== 0) return false;
  w._socket.write(sharedTextFrame(payload));
  return true;
}
