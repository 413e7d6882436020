import { OPEN, type WebSocketLike } from './socket.js';
import type { TokenRefresh } from './token-refresh.js';

type Timer = ReturnType<typeof setTimeout>;

// setTimeout fires at once past 2^31-1 ms (a token valid for more than 24 days).
const MAX_TIMER_MS = 2_147_483_647;

/** One WebSocket of the logical connection, and the timers that die with it. */
export class Connection {
  ready = false;
  /** The server said when to come back (`retry_after_ms` of the error frame before a 4429). */
  retryAfterMs: number | undefined;
  /** The HTTP status of a refused upgrade, when the implementation tells it. */
  status: number | undefined;
  refresh!: TokenRefresh;
  private readonly timers = new Set<Timer>();
  private pongTimer: Timer | undefined;

  constructor(readonly ws: WebSocketLike) {}

  /** A timer cleared when the connection ends. */
  after(ms: number, fn: () => void): Timer {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, Math.min(ms, MAX_TIMER_MS));
    this.timers.add(t);
    return t;
  }

  cancel(timer: Timer): void {
    clearTimeout(timer);
    this.timers.delete(timer);
  }

  send(frame: Record<string, unknown>): void {
    if (this.ws.readyState === OPEN) this.ws.send(JSON.stringify(frame));
  }

  /** Any frame proves the connection is alive. */
  heard(): void {
    clearTimeout(this.pongTimer);
    this.pongTimer = undefined;
  }

  /** A `ping` every `intervalMs`; nothing heard `timeoutMs` after the first unanswered one calls `onDead`. */
  schedulePing(intervalMs: number, timeoutMs: number, ref: () => string, onDead: () => void): void {
    if (intervalMs <= 0) return;
    this.after(intervalMs, () => {
      this.send({ type: 'ping', ref: ref() });
      // Armed by the first unanswered ping, cleared by any frame: later pings do not push it back.
      this.pongTimer ??= setTimeout(onDead, timeoutMs);
      this.schedulePing(intervalMs, timeoutMs, ref, onDead);
    });
  }

  /** Clears every timer; with `detach`, stops listening to the socket and closes it. */
  end(detach?: { code: number; reason: string }): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    clearTimeout(this.pongTimer);
    if (!detach) return;
    this.ws.onclose = null;
    this.ws.onmessage = null;
    try {
      this.ws.close(detach.code, detach.reason);
    } catch {
      // Not open yet or already closing.
    }
  }
}
