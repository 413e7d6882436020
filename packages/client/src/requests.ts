import { errorFromFrame, RelayClientError } from './client-error.js';
import type { Ref, ServerFrame } from './frames.js';
import type { ConnectionState } from './types.js';

type Timer = ReturnType<typeof setTimeout>;

/** What requests need from the connection they are sent on. */
export interface RequestsHost {
  state(): ConnectionState;
  /** The tenant of the current connection when it is ready, else undefined. */
  readyTenant(): string | undefined;
  /** Sends on the current connection. */
  send(frame: Record<string, unknown>): void;
  /** Starts connecting when the client has not yet. */
  connectIfIdle(): void;
  /** `requestTimeoutMs`: how long a request waits for its answer (0: forever). */
  readonly timeoutMs: number;
}

/** How a request waits: `queue: false` fails at once without a ready connection; `resend`: see PendingRequest. */
export interface RequestOptions {
  topic?: string;
  queue?: boolean;
  resend?: boolean;
}

export interface PendingRequest {
  /** The frame to send once the tenant is known (topics need it). */
  build: (tenantId: string) => Record<string, unknown>;
  type: string;
  topic?: string;
  resolve: (frame: ServerFrame) => void;
  reject: (err: RelayClientError) => void;
  timer: Timer | undefined;
  sent: boolean;
  /** Sent on some connection before (it may have taken effect). */
  everSent?: boolean;
  /** Safe to send again (a publish with an idempotency key): a lost connection re-queues it instead of failing it. */
  resend?: boolean;
}

/**
 * Requests waiting for their reply, by `ref`. A request made while no
 * connection is ready waits (within its timeout) and is sent on the next one;
 * a request already sent when its connection ends fails with
 * `connection_lost`, because it may or may not have taken effect, unless it
 * is safe to send again (`resend`): then it waits for the next connection.
 */
export class RequestTable {
  private readonly pending = new Map<string, PendingRequest>();
  private counter = 0;

  constructor(private readonly host: RequestsHost) {}

  /**
   * Sends a request on the ready connection, or queues it for the next one
   * (connecting when the client has not yet); resolves with its answer.
   */
  request(type: string, build: (tenantId: string) => Record<string, unknown>, o: RequestOptions): Promise<ServerFrame> {
    const host = this.host;
    if (host.state() === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed', { frame: type }));
    const tenantId = host.readyTenant();
    if (o.queue === false && tenantId === undefined) return Promise.reject(new RelayClientError('connection_lost', 'not connected', { frame: type }));
    return new Promise((resolve, reject) => {
      const req = { build, type, ...(o.topic !== undefined && { topic: o.topic }), ...(o.resend && { resend: true }), resolve, reject };
      const { ref, entry } = this.add(req, host.timeoutMs);
      if (tenantId !== undefined) {
        entry.sent = true;
        host.send({ type, ...build(tenantId), ref });
      } else if (host.state() === 'idle') {
        host.connectIfIdle();
      }
    });
  }

  /** On `ready`: the requests that waited for a connection go out, oldest first. */
  sendUnsent(tenantId: string): void {
    for (const [ref, req] of this.unsent()) {
      req.sent = true;
      this.host.send({ type: req.type, ...req.build(tenantId), ref });
    }
  }

  private add(req: Omit<PendingRequest, 'timer' | 'sent' | 'everSent'>, timeoutMs: number): { ref: string; entry: PendingRequest } {
    const ref = `c${++this.counter}`;
    const entry: PendingRequest = { ...req, sent: false, timer: undefined };
    if (timeoutMs > 0) {
      entry.timer = setTimeout(() => {
        if (this.pending.get(ref) !== entry) return;
        this.pending.delete(ref);
        const sent = entry.sent || entry.everSent === true;
        const what = sent ? `no answer to ${req.type}` : `no connection to send ${req.type} on`;
        entry.reject(new RelayClientError('timeout', `${what} within ${timeoutMs} ms`, { frame: req.type, sent, ...(req.topic !== undefined && { topic: req.topic }) }));
      }, timeoutMs);
    }
    this.pending.set(ref, entry);
    return { ref, entry };
  }

  /** Requests not yet sent, oldest first. */
  private unsent(): [string, PendingRequest][] {
    return [...this.pending].filter(([, r]) => !r.sent);
  }

  has(ref: Ref | undefined): boolean {
    return typeof ref === 'string' && this.pending.has(ref);
  }

  /** Settles the request a reply or error frame answers; false when no request carries its ref. */
  settle(frame: ServerFrame & { ref?: Ref }): boolean {
    if (typeof frame.ref !== 'string') return false;
    const entry = this.pending.get(frame.ref);
    if (!entry) return false;
    this.pending.delete(frame.ref);
    clearTimeout(entry.timer);
    if (frame.type === 'error') {
      entry.reject(errorFromFrame(frame, { frame: entry.type, ...(entry.topic !== undefined && { topic: entry.topic }) }));
    } else {
      entry.resolve(frame);
    }
    return true;
  }

  /**
   * Settles the oldest sent request of `type` on `topic` (a channel name): for
   * an answer that does not echo `ref`. False when none waits.
   */
  settleOldest(type: string, topic: string, frame: ServerFrame): boolean {
    for (const [ref, entry] of this.pending) {
      if (!entry.sent || entry.type !== type || entry.topic !== topic) continue;
      this.pending.delete(ref);
      clearTimeout(entry.timer);
      entry.resolve(frame);
      return true;
    }
    return false;
  }

  /** Fails the requests that were sent on a connection that ended (re-queues those safe to resend); unsent ones keep waiting. */
  failSent(closeCode: number): void {
    for (const [ref, entry] of [...this.pending]) {
      if (!entry.sent) continue;
      if (entry.resend) {
        entry.sent = false;
        entry.everSent = true;
        continue;
      }
      this.pending.delete(ref);
      clearTimeout(entry.timer);
      entry.reject(new RelayClientError('connection_lost', `the connection closed (${closeCode}) before ${entry.type} was answered`, { frame: entry.type, closeCode, ...(entry.topic !== undefined && { topic: entry.topic }) }));
    }
  }

  failAll(err: () => RelayClientError): void {
    for (const [ref, entry] of [...this.pending]) {
      this.pending.delete(ref);
      clearTimeout(entry.timer);
      entry.reject(err());
    }
  }
}
