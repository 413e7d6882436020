import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** Each connection of one address already held lengthens the next hold by this much: an address gets about 10 such answers a second in all. */
const PER_HELD_CONNECTION_MS = 100;

/**
 * After the gateway answers a request itself with "not now" (its own `429
 * rate_limited` for an address past its budget, the unproven lane's `503`),
 * the connection that carried it is not read from again for a while: at
 * least the answer's Retry-After, longer the more connections of the same
 * client address are held already (100 ms more for each), at most `maxMs`.
 * The answer already told the client to wait; a client that does not wait
 * finds its next request read then, not refused (or, past the server's
 * keep-alive timeout, its connection closed). What this buys, measured in
 * tests/faults/overload.test.ts: a flood on kept-alive connections costs
 * the gateway about ten answers a second per address, however many
 * connections it spreads over, instead of one per request, so the event loop
 * stays free for valid traffic (docs/OPERATIONS.md "Overload"). Only the
 * answered connection waits: other connections of the same address, a
 * valid client behind the same NAT, are read as before.
 */
export class ConnectionHold {
  private readonly heldByAddress = new Map<string, number>();
  private held = 0;
  private total = 0;

  constructor(private readonly maxMs: number) {}

  /** Holds `req`'s connection once `res` is written (see the class). */
  afterAnswer(req: IncomingMessage, res: ServerResponse, address: string, retryAfterS: number): void {
    if (!(this.maxMs > 0)) return;
    const socket: Socket = req.socket;
    res.once('finish', () => {
      if (socket.destroyed) return;
      const already = this.heldByAddress.get(address) ?? 0;
      const ms = Math.min(this.maxMs, Math.max(retryAfterS * 1000, (already + 1) * PER_HELD_CONNECTION_MS));
      this.heldByAddress.set(address, already + 1);
      socket.pause();
      this.held++;
      this.total++;
      const release = () => {
        clearTimeout(timer);
        socket.off('close', release);
        this.held--;
        const left = (this.heldByAddress.get(address) ?? 1) - 1;
        if (left <= 0) this.heldByAddress.delete(address);
        else this.heldByAddress.set(address, left);
        if (!socket.destroyed) socket.resume();
      };
      const timer = setTimeout(release, ms);
      socket.once('close', release);
    });
  }

  /** Connections held now, and since start (for metrics). */
  get current(): { held: number; total: number } {
    return { held: this.held, total: this.total };
  }
}
