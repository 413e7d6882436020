import type { Writable } from 'node:stream';

/**
 * `end()` as Node has it, except that a bare `end()` on a stream whose
 * writable side is already over (finished, or ended and destroyed) returns at
 * once. Node's own builds an ERR_STREAM_ALREADY_FINISHED (or
 * ERR_STREAM_DESTROYED) error there, capturing a full stack trace, and drops
 * it: with no callback nobody can see it. With a callback or a chunk, Node's.
 */
function endUnlessOver(this: Writable, ...args: unknown[]): Writable {
  if (args.length === 0 && (this.writableFinished || (this.writableEnded && this.destroyed))) return this;
  return (Object.getPrototypeOf(this) as { end(...a: unknown[]): Writable }).end.apply(this, args);
}

/**
 * Makes a repeated bare `end()` on this stream free. ws ends a WebSocket's
 * socket and its frame parser again as a close completes (its socket 'end' and
 * 'close' listeners), each time on a stream already over. Each dropped error
 * cost 6–9 µs of CPU on an Intel Xeon bench machine, and 485–673 ms of
 * realtime's CPU in the seconds after a disable of 10,000 connections went to
 * them, profiled (bench/README.md "Scale of one instance").
 */
export function skipRepeatedEnd(stream: Writable): void {
  stream.end = endUnlessOver as Writable['end'];
}

/**
 * The same for a `ws` WebSocket, client or server: its socket and its frame
 * parser (ws keeps both private). Called once the connection is open, it
 * covers every close of it, from either side.
 */
export function skipRepeatedWsEnds(ws: object): void {
  const w = ws as { _socket?: Writable | null; _receiver?: Writable | null };
  if (w._socket) skipRepeatedEnd(w._socket);
  if (w._receiver) skipRepeatedEnd(w._receiver);
}
