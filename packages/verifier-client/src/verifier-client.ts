import * as grpc from '@grpc/grpc-js';
import { RelayError, traceHeaders, type Logger } from '@service-relay/core';
import {
  internalClient,
  internalMetadata,
  MAX_VERIFY_BATCH,
  VERIFIER_PROTO,
  VERIFIER_SERVICE,
  type VerifyBatchRequest,
  type VerifyBatchResponse,
  type VerifyStreamRequest,
  type VerifyStreamResponse,
} from '@service-relay/grpc';
import { fromWire, type VerifyResult } from './verify-result';

export interface VerifierClientOptions {
  /** host:port of the auth-verifier's gRPC server. */
  address: string;
  /** INTERNAL_TOKEN: the verifier answers no one without it. */
  internalToken: string;
  /** A check not answered within this is auth_unavailable. */
  deadlineMs?: number;
  /** Checks in flight at once; beyond it a check fails fast with auth_unavailable. */
  maxInFlight?: number;
  /**
   * The part of maxInFlight that `refresh` checks may hold (default 0.25).
   * Refreshes come from connections already open, so a flood of them must
   * never leave new upgrades and requests without verifier capacity.
   */
  refreshShare?: number;
  /**
   * Most checks in one VerifyBatchStream message (default and upper bound
   * MAX_VERIFY_BATCH, 256); more checks issued on one turn of the event loop
   * go in several messages.
   */
  maxBatch?: number;
  /**
   * After a verifier answered UNIMPLEMENTED to VerifyBatchStream (it predates
   * it), the streams opened within this use VerifyStream (default 60 s).
   */
  batchRetryMs?: number;
  /** How long checks wait at most for the last message's first answer before they go anyway (default 1 ms). */
  lingerMs?: number;
  logger?: Logger;
}

/** `admission`: an upgrade or a request (the default); `refresh`: a token refresh on an open connection. */
export type CheckKind = 'admission' | 'refresh';

export interface VerifierClient {
  /**
   * Resolves with the verdict; rejects with RelayError('auth_unavailable') when
   * the verifier cannot answer. `minSeq`: the verdict must reflect at least this
   * tenant-feed position (see verifyFresh).
   */
  verify(token: string, kind?: CheckKind, minSeq?: number): Promise<VerifyResult>;
  /** True when a unary health round trip succeeds. */
  ready(): Promise<boolean>;
  close(): void;
}

interface Pending {
  refresh: boolean;
  /** The message as sent, to send again on a new stream (once) if this one breaks. */
  msg: VerifyStreamRequest;
  /** Written to the current stream (false while it waits in the outbox for the next flush). */
  written: boolean;
  resent: boolean;
  resolve: (r: VerifyResult) => void;
  reject: (e: RelayError) => void;
  deadline: number;
}

type BatchStream = grpc.ClientDuplexStream<VerifyBatchRequest, VerifyBatchResponse>;
type SingleStream = grpc.ClientDuplexStream<VerifyStreamRequest, VerifyStreamResponse>;
type OpenStream = { batch: true; call: BatchStream } | { batch: false; call: SingleStream };

/** How long checks wait at most for the last write's first answer before they go anyway. */
const LINGER_MS = 1;

/**
 * Sends checks over one long-lived stream (a unary call per check costs
 * several times the check itself), many checks per message: the checks issued
 * on one turn of the event loop are written together, on the next, as one
 * VerifyBatchStream message (at most maxBatch each), because grpc-js and HTTP/2
 * cost more per message than the check does. While the last write has had no
 * answer, further checks wait for its first answer (at most LINGER_MS, or
 * until maxBatch wait), so a load that issues one check a turn (connects)
 * still sends several per message; idle, nothing waits. Answers come back by
 * id, in any grouping; each check keeps its own deadline and its own verdict
 * or `unavailable`.
 *
 * When the stream breaks or ends (a verifier stopping ends its streams), each
 * pending check still within its deadline is sent once more on a new stream:
 * a check only reads, so sending it twice is safe, and a rolling restart of the
 * verifiers then answers no request auth_unavailable. A check broken twice
 * fails closed. grpc-js reconnects the channel (to another verifier behind a
 * Service).
 *
 * A verifier older than VerifyBatchStream answers it UNIMPLEMENTED before
 * judging anything: the client then sends the same checks (not counted as a
 * resend) on VerifyStream, one per message, and keeps to VerifyStream for the
 * streams it opens during the next minute (batchRetryMs); the first stream opened after that
 * tries VerifyBatchStream again, so a rolling upgrade ends with every caller
 * batching.
 */
export class StreamingVerifierClient implements VerifierClient {
  private readonly client: grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  private readonly pending = new Map<number, Pending>();
  private stream: OpenStream | undefined;
  /** Checks issued since the last flush, in issue order. */
  private outbox: Pending[] = [];
  private flushScheduled = false;
  /** The last write has had no answer yet: checks issued meanwhile wait for one, at most LINGER_MS. */
  private unanswered = false;
  private linger: NodeJS.Timeout | undefined;
  /** Until then, new streams are VerifyStream (the verifier answered UNIMPLEMENTED to the batch RPC). */
  private singleUntil = 0;
  private nextId = 1;
  private readonly deadlineMs: number;
  private readonly maxInFlight: number;
  private readonly maxRefreshInFlight: number;
  private readonly maxBatch: number;
  private readonly batchRetryMs: number;
  private readonly lingerMs: number;
  private refreshInFlight = 0;
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;
  private readonly metadata: grpc.Metadata;

  constructor(private readonly opts: VerifierClientOptions) {
    this.client = internalClient(VERIFIER_PROTO, VERIFIER_SERVICE, opts.address, { 'grpc.keepalive_time_ms': 10_000, 'grpc.keepalive_timeout_ms': 5_000 });
    this.metadata = internalMetadata(opts.internalToken);
    this.deadlineMs = opts.deadlineMs ?? 2000;
    this.maxInFlight = opts.maxInFlight ?? 4096;
    this.maxRefreshInFlight = Math.max(1, Math.floor(this.maxInFlight * (opts.refreshShare ?? 0.25)));
    this.maxBatch = Math.min(MAX_VERIFY_BATCH, Math.max(1, Math.floor(opts.maxBatch ?? MAX_VERIFY_BATCH)));
    this.batchRetryMs = opts.batchRetryMs ?? 60_000;
    this.lingerMs = opts.lingerMs ?? LINGER_MS;
    // One sweep timer instead of a timer per call.
    this.sweeper = setInterval(() => this.expire(), Math.max(10, Math.floor(this.deadlineMs / 4)));
    this.sweeper.unref();
  }

  verify(token: string, kind: CheckKind = 'admission', minSeq = 0): Promise<VerifyResult> {
    if (this.closed) return Promise.reject(new RelayError('auth_unavailable', 'verifier client closed'));
    if (this.pending.size >= this.maxInFlight) return Promise.reject(new RelayError('auth_unavailable', 'too many checks in flight'));
    const refresh = kind === 'refresh';
    if (refresh && this.refreshInFlight >= this.maxRefreshInFlight) return Promise.reject(new RelayError('auth_unavailable', 'too many refreshes in flight'));
    const id = this.nextId++;
    if (refresh) this.refreshInFlight++;
    return new Promise<VerifyResult>((resolve, reject) => {
      // The caller's span (the gateway's request, realtime's upgrade) goes with
      // the check: the stream is shared, so the trace context is per message.
      const { traceparent } = traceHeaders();
      const msg: VerifyStreamRequest = traceparent === undefined ? { id, token } : { id, token, traceparent };
      if (minSeq > 0) msg.min_seq = minSeq;
      const p: Pending = { refresh, msg, written: false, resent: false, resolve, reject, deadline: Date.now() + this.deadlineMs };
      this.pending.set(id, p);
      this.outbox.push(p);
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  /** Writes the outbox: the checks issued since the last flush that are still pending. */
  private flush(): void {
    this.flushScheduled = false;
    // While the last write waits for its first answer, the outbox fills: under
    // load the checks of several turns share one message (at 50 connects in
    // flight about one upgrade arrives per turn, and each check paid a whole
    // message on both sides). Idle, nothing is unanswered and nothing waits.
    if (this.unanswered && !this.closed && this.outbox.length < this.maxBatch) {
      this.linger ??= setTimeout(() => {
        this.linger = undefined;
        this.unanswered = false;
        this.scheduleFlush();
      }, this.lingerMs);
      return;
    }
    if (this.linger) {
      clearTimeout(this.linger);
      this.linger = undefined;
    }
    const out = this.outbox;
    this.outbox = [];
    if (this.closed) return;
    const msgs: VerifyStreamRequest[] = [];
    for (const p of out) {
      // Settled meanwhile (deadline, closed): nothing to send.
      if (this.pending.get(p.msg.id) !== p) continue;
      p.written = true;
      msgs.push(p.msg);
    }
    if (msgs.length > 0) this.write(msgs);
  }

  private write(msgs: VerifyStreamRequest[]): void {
    const s = this.openStream();
    this.unanswered = true;
    if (s.batch) {
      for (let i = 0; i < msgs.length; i += this.maxBatch) s.call.write({ checks: msgs.slice(i, i + this.maxBatch) });
    } else {
      for (const m of msgs) s.call.write(m);
    }
  }

  /** Takes a check out of the pending set, releasing its share of the budget. */
  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    if (!p) return undefined;
    this.pending.delete(id);
    if (p.refresh) this.refreshInFlight--;
    return p;
  }

  private answer(msg: VerifyStreamResponse): void {
    if (this.unanswered) {
      this.unanswered = false;
      if (this.outbox.length > 0) this.scheduleFlush();
    }
    const p = this.settle(msg.id);
    if (!p) return;
    if (msg.unavailable || !msg.result) p.reject(new RelayError('auth_unavailable', 'verifier could not decide'));
    else p.resolve(fromWire(msg.result));
  }

  async ready(): Promise<boolean> {
    return new Promise((resolve) => {
      this.client.waitForReady(Date.now() + 1000, (err?: Error) => resolve(!err));
    });
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    clearTimeout(this.linger);
    this.outbox = [];
    this.failAll('verifier client closed');
    this.stream?.call.cancel();
    this.client.close();
  }

  private openStream(): OpenStream {
    if (this.stream) return this.stream;
    const batch = Date.now() >= this.singleUntil;
    let s: OpenStream;
    if (batch) {
      const call = (this.client.VerifyBatchStream as (md: grpc.Metadata) => BatchStream)(this.metadata);
      call.on('data', (msg: VerifyBatchResponse) => {
        for (const r of msg.results ?? []) this.answer(r);
      });
      s = { batch, call };
    } else {
      const call = (this.client.VerifyStream as (md: grpc.Metadata) => SingleStream)(this.metadata);
      call.on('data', (msg: VerifyStreamResponse) => this.answer(msg));
      s = { batch, call };
    }
    s.call.on('error', (err: grpc.ServiceError) => {
      // close() cancelled it: a clean stop, nothing failed.
      if (this.closed && err.code === grpc.status.CANCELLED) return;
      if (s.batch && err.code === grpc.status.UNIMPLEMENTED) {
        this.opts.logger?.info({ code: err.code }, 'verifier predates VerifyBatchStream; using VerifyStream');
        this.singleUntil = Date.now() + this.batchRetryMs;
        return this.broken(s, 'verifier stream failed', false);
      }
      this.opts.logger?.warn({ code: err.code, details: err.details }, 'verifier stream failed');
      this.broken(s, 'verifier stream failed', true);
    });
    s.call.on('end', () => this.broken(s, 'verifier stream ended', true));
    this.stream = s;
    return s;
  }

  /**
   * The stream `s` is over: its unanswered checks go once more on a new stream
   * (`counts` false when the verifier judged none of them: UNIMPLEMENTED).
   */
  private broken(s: OpenStream, why: string, counts: boolean): void {
    if (this.stream !== s) return;
    this.stream = undefined;
    // Nothing more will answer that stream's writes: what waits for them goes on the next.
    this.unanswered = false;
    if (this.outbox.length > 0) this.scheduleFlush();
    if (this.closed) return this.failAll(why);
    const now = Date.now();
    const again: VerifyStreamRequest[] = [];
    for (const [id, p] of this.pending) {
      // Still in the outbox: the next flush writes it to the new stream.
      if (!p.written) continue;
      if (p.deadline <= now || (counts && p.resent)) {
        this.settle(id);
        p.reject(new RelayError('auth_unavailable', why));
      } else {
        if (counts) p.resent = true;
        again.push(p.msg);
      }
    }
    if (again.length > 0) this.write(again);
  }

  private failAll(why: string): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    this.refreshInFlight = 0;
    for (const p of all) p.reject(new RelayError('auth_unavailable', why));
  }

  private expire(): void {
    const now = Date.now();
    // Insertion order is deadline order (one deadline for all), so stop at the first live one.
    for (const [id, p] of this.pending) {
      if (p.deadline > now) break;
      this.settle(id);
      p.reject(new RelayError('auth_unavailable', 'verifier deadline exceeded'));
    }
  }
}

export function createVerifierClient(opts: VerifierClientOptions): VerifierClient {
  return new StreamingVerifierClient(opts);
}
