import * as grpc from '@grpc/grpc-js';
import { RelayError, traceHeaders, type Logger } from '@service-relay/core';
import { internalClient, internalMetadata, VERIFIER_PROTO, VERIFIER_SERVICE, type VerifyStreamRequest, type VerifyStreamResponse } from '@service-relay/grpc';
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
  logger?: Logger;
}

/** `admission`: an upgrade or a request (the default); `refresh`: a token refresh on an open connection. */
export type CheckKind = 'admission' | 'refresh';

export interface VerifierClient {
  /** Resolves with the verdict; rejects with RelayError('auth_unavailable') when the verifier cannot answer. */
  verify(token: string, kind?: CheckKind): Promise<VerifyResult>;
  /** True when a unary health round trip succeeds. */
  ready(): Promise<boolean>;
  close(): void;
}

interface Pending {
  refresh: boolean;
  /** The message as sent, to send again on a new stream (once) if this one breaks. */
  msg: VerifyStreamRequest;
  resent: boolean;
  resolve: (r: VerifyResult) => void;
  reject: (e: RelayError) => void;
  deadline: number;
}

/**
 * Sends checks over one long-lived VerifyStream (a unary call per check costs
 * several times the check itself). When the stream breaks or ends (a verifier
 * stopping ends its streams), each pending check still within its deadline is
 * sent once more on a new stream: a check only reads, so sending it twice is
 * safe, and a rolling restart of the verifiers then answers no request
 * auth_unavailable. A check broken twice fails closed. grpc-js reconnects the
 * channel (to another verifier behind a Service).
 */
export class StreamingVerifierClient implements VerifierClient {
  private readonly client: grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  private readonly pending = new Map<number, Pending>();
  private stream: grpc.ClientDuplexStream<VerifyStreamRequest, VerifyStreamResponse> | undefined;
  private nextId = 1;
  private readonly deadlineMs: number;
  private readonly maxInFlight: number;
  private readonly maxRefreshInFlight: number;
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
    // One sweep timer instead of a timer per call.
    this.sweeper = setInterval(() => this.expire(), Math.max(10, Math.floor(this.deadlineMs / 4)));
    this.sweeper.unref();
  }

  verify(token: string, kind: CheckKind = 'admission'): Promise<VerifyResult> {
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
      this.pending.set(id, { refresh, msg, resent: false, resolve, reject, deadline: Date.now() + this.deadlineMs });
      this.openStream().write(msg);
    });
  }

  /** Takes a check out of the pending set, releasing its share of the budget. */
  private settle(id: number): Pending | undefined {
    const p = this.pending.get(id);
    if (!p) return undefined;
    this.pending.delete(id);
    if (p.refresh) this.refreshInFlight--;
    return p;
  }

  async ready(): Promise<boolean> {
    return new Promise((resolve) => {
      this.client.waitForReady(Date.now() + 1000, (err?: Error) => resolve(!err));
    });
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    this.failAll('verifier client closed');
    this.stream?.cancel();
    this.client.close();
  }

  private openStream(): grpc.ClientDuplexStream<VerifyStreamRequest, VerifyStreamResponse> {
    if (this.stream) return this.stream;
    const stream = (this.client.VerifyStream as (md: grpc.Metadata) => grpc.ClientDuplexStream<VerifyStreamRequest, VerifyStreamResponse>)(this.metadata);
    stream.on('data', (msg: VerifyStreamResponse) => {
      const p = this.settle(msg.id);
      if (!p) return;
      if (msg.unavailable || !msg.result) p.reject(new RelayError('auth_unavailable', 'verifier could not decide'));
      else p.resolve(fromWire(msg.result));
    });
    const broken = (why: string) => {
      if (this.stream !== stream) return;
      this.stream = undefined;
      if (this.closed) return this.failAll(why);
      const now = Date.now();
      const again: VerifyStreamRequest[] = [];
      for (const [id, p] of this.pending) {
        if (p.resent || p.deadline <= now) {
          this.settle(id);
          p.reject(new RelayError('auth_unavailable', why));
        } else {
          p.resent = true;
          again.push(p.msg);
        }
      }
      if (again.length > 0) {
        const next = this.openStream();
        for (const m of again) next.write(m);
      }
    };
    stream.on('error', (err: grpc.ServiceError) => {
      this.opts.logger?.warn({ code: err.code, details: err.details }, 'verifier stream failed');
      broken('verifier stream failed');
    });
    stream.on('end', () => broken('verifier stream ended'));
    this.stream = stream;
    return stream;
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
