import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { withTimeout, type Clock, type Logger } from '@service-relay/core';
import type { Registry } from 'prom-client';
import { Counter, Gauge } from 'prom-client';
import type { TenantEvent } from './tenant-event';
import type { TenantEventBus } from './tenant-event-bus';
import { FeedListeners, type ChangeHandler } from './feed-listeners';
import { TenantPositions } from './tenant-positions';

export interface FeedAnswer {
  latestSeq: number;
  changes: TenantEvent[];
  reset: boolean;
}

/** Where committed changes come from: the registry's TenantFeed.ChangesSince. */
export interface ChangeSource {
  /** Reports `appliedSeq` (the registry records it) and returns what came after it. */
  changesSince(req: { appliedSeq: number; leaseMs: number; limit: number; deadlineMs: number }): Promise<FeedAnswer>;
  close(): void;
}

export type { ChangeHandler } from './feed-listeners';

export interface TenantFeedOptions {
  source: ChangeSource;
  /** Wake-ups; without one the feed relies on polling alone. */
  bus?: TenantEventBus | undefined;
  leaseMs: number;
  /** Default: a quarter of the lease, so one slow poll does not lose it. */
  pollIntervalMs?: number;
  clock: Clock;
  logger: Logger;
  /** Default: kind, host, pid and a random suffix. */
  consumerId?: string;
}

export function newConsumerId(kind: string): string {
  return `${kind}-${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/** The read side every consumer needs; tests fake it. */
export interface TenantFeedView {
  subscribe(handler: ChangeHandler): () => void;
  onReset(handler: () => void | Promise<void>): () => void;
  isCurrent(): boolean;
  /** The sequence this consumer's knowledge starts at: state read before it may have missed changes. */
  baseSeq(): number;
  /** The last sequence every handler has finished (-1 before the first sync). */
  appliedSeq(): number;
  /**
   * The feed position a verdict about this tenant must reflect to be used
   * here: the last change of the tenant this consumer applied (or began to
   * apply), raised by resets (TenantPositions).
   */
  requiredSeq(tenantId: string): number;
  /** Resolves true once `seq` is applied (pulling at once), false if not within `timeoutMs`. */
  whenApplied(seq: number, timeoutMs: number): Promise<boolean>;
}

/** What a service owns: the view plus its life cycle. TenantFeed, or ManualTenantFeed in tests. */
export interface TenantFeedHandle extends TenantFeedView {
  start(waitMs?: number): Promise<void>;
  close(): void;
  addMetrics(registry: Registry, prefix: string): void;
}

const PAGE = 500;
/** Pages pulled in one sync at most; the rest waits for the next tick. */
const MAX_PAGES = 100;

/**
 * The consumer side of the tenant feed, one per process and service
 * (docs/ARCHITECTURE.md "Tenant feed"). It pulls committed changes from the
 * registry in sequence order and runs every handler on each before it counts
 * the change as applied; the next request reports that, and the registry's
 * admin calls wait for it.
 *
 * The lease: the feed is current only while it has applied everything the
 * registry had committed as of a request sent less than `leaseMs` ago. It is
 * measured from the moment the request was sent, on this process's clock, so a
 * slow or frozen network can only shorten it, never extend it. A consumer that
 * is not current trusts no cache: it asks the registry, or fails closed.
 */
export class TenantFeed extends FeedListeners implements TenantFeedHandle {
  readonly consumerId: string;
  private applied = -1;
  private base = -1;
  private knownLatest = -1;
  private leaseUntil = 0;
  private wasCurrent = false;
  /** Seen current since the last loss counted: the lease running out now is a loss. */
  private leaseHeld = false;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private offNotice: (() => void) | undefined;
  private lastError = '';
  private leaseLosses = 0;
  private readonly positions = new TenantPositions();
  private readonly waiters = new Set<{ seq: number; done: (ok: boolean) => void }>();

  constructor(
    readonly kind: string,
    private readonly opts: TenantFeedOptions,
  ) {
    super();
    this.consumerId = opts.consumerId ?? newConsumerId(kind);
  }

  isCurrent(): boolean {
    return this.applied >= 0 && this.applied >= this.knownLatest && this.opts.clock.now() < this.leaseUntil;
  }

  baseSeq(): number {
    return this.base;
  }

  appliedSeq(): number {
    return this.applied;
  }

  requiredSeq(tenantId: string): number {
    return this.positions.required(tenantId);
  }

  whenApplied(seq: number, timeoutMs: number): Promise<boolean> {
    if (this.applied >= seq) return Promise.resolve(true);
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        seq,
        done: (ok: boolean) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(ok);
        },
      };
      const timer = setTimeout(() => waiter.done(false), timeoutMs);
      this.waiters.add(waiter);
      void this.sync();
    });
  }

  /** First sync (bounded by `waitMs`), then polling and wake-ups. Not current until the first sync completes. */
  async start(waitMs = 5000): Promise<void> {
    this.offNotice = this.opts.bus?.onNotice((seq) => {
      if (seq === undefined || seq > this.applied) void this.sync();
    });
    this.timer = setInterval(() => {
      this.noteTransition();
      void this.sync();
    }, this.opts.pollIntervalMs ?? Math.max(50, Math.floor(this.opts.leaseMs / 4)));
    this.timer.unref();
    await withTimeout(this.sync(), waitMs).catch(() => {});
    if (!this.isCurrent()) this.opts.logger.warn({ consumer: this.consumerId }, 'tenant feed not current yet; trusting no cache until it is');
  }

  async ready(): Promise<boolean> {
    return this.isCurrent();
  }

  /** Pulls until caught up. Concurrent calls share one run (which then goes once more). */
  sync(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    const run = (async () => {
      try {
        do {
          this.again = false;
          await this.pull();
        } while (this.again && !this.closed);
      } finally {
        this.running = undefined;
        this.noteTransition();
      }
    })();
    this.running = run;
    return run;
  }

  /** Current or not, applied and latest sequence, for /metrics and /readyz. */
  addMetrics(registry: Registry, prefix: string): void {
    new Gauge({ name: `${prefix}_tenant_feed_current`, help: '1 while the tenant feed is current (lease held), else 0', registers: [registry], collect: gaugeOf(() => (this.isCurrent() ? 1 : 0)) });
    new Gauge({ name: `${prefix}_tenant_feed_applied_seq`, help: 'Last tenant feed sequence applied', registers: [registry], collect: gaugeOf(() => this.applied) });
    new Gauge({ name: `${prefix}_tenant_feed_lag_seq`, help: 'Committed tenant changes not applied yet (as last seen)', registers: [registry], collect: gaugeOf(() => Math.max(0, this.knownLatest - this.applied)) });
    new Counter({ name: `${prefix}_tenant_feed_lease_losses_total`, help: 'Times the tenant feed lease ran out', registers: [registry], collect: counterOf(() => this.leaseLosses) });
  }

  close(): void {
    this.closed = true;
    for (const w of [...this.waiters]) w.done(false);
    clearInterval(this.timer);
    this.offNotice?.();
    this.opts.source.close();
  }

  private async pull(): Promise<void> {
    const { source, leaseMs, clock } = this.opts;
    for (let page = 0; page < MAX_PAGES && !this.closed; page++) {
      const sentAt = clock.now();
      let answer: FeedAnswer;
      try {
        answer = await source.changesSince({ appliedSeq: this.applied, leaseMs, limit: PAGE, deadlineMs: Math.min(leaseMs, 2000) });
      } catch (err) {
        this.failed((err as Error).message);
        return;
      }
      this.knownLatest = Math.max(this.knownLatest, answer.latestSeq);
      if (answer.reset || this.applied < 0) {
        // First contact, or the changes we would need are gone: start over
        // from the latest sequence, holding nothing older. The next request
        // reports the new position before the lease is taken.
        if (this.applied >= 0) {
          this.opts.logger.warn({ applied_seq: this.applied, latest_seq: answer.latestSeq }, 'tenant feed reset: dropping every cached tenant state');
          // Before the handlers: no verdict from before the reset is used from here on.
          this.positions.reset(answer.latestSeq);
          await this.runReset();
        }
        this.setApplied(answer.latestSeq);
        this.base = answer.latestSeq;
        this.knownLatest = answer.latestSeq;
        continue;
      }
      for (const change of answer.changes) {
        if (change.seq <= this.applied) continue;
        if (!(await this.apply(change))) return;
        this.setApplied(change.seq);
      }
      if (answer.changes.length === 0 && this.applied >= answer.latestSeq) {
        // The registry recorded us as current in this same request.
        this.leaseUntil = sentAt + leaseMs;
        this.lastError = '';
        return;
      }
    }
  }

  private setApplied(seq: number): void {
    this.applied = seq;
    for (const w of [...this.waiters]) if (w.seq <= seq) w.done(true);
  }

  private async apply(change: TenantEvent): Promise<boolean> {
    // Before any handler runs (and stays if one fails: the change is committed).
    this.positions.applied(change.tenant_id, change.seq);
    const results = await Promise.allSettled([...this.handlers].map(async (h) => withTimeout(Promise.resolve(h(change)), this.opts.leaseMs)));
    const failed = results.find((r) => r.status === 'rejected');
    if (!failed) return true;
    this.failed(`a handler failed on change ${change.seq}: ${(failed.reason as Error)?.message ?? String(failed.reason)}`);
    return false;
  }

  private async runReset(): Promise<void> {
    await Promise.allSettled([...this.resetHandlers].map(async (h) => h()));
  }

  private failed(message: string): void {
    if (message !== this.lastError) this.opts.logger.warn({ err: message, applied_seq: this.applied }, 'tenant feed pull failed');
    this.lastError = message;
  }

  private noteTransition(): void {
    // A lease lost is one that ran out. Applying a change it knows of also
    // makes the feed not current for the handlers' while (caches are not
    // trusted meanwhile), but that is no loss (seen: a poll landing inside
    // the handlers of a disable counted one, in the overload fault test).
    // A lease taken by an answer that came after it had already run out was never held: no loss either.
    const now = this.isCurrent();
    if (now) this.leaseHeld = true;
    else if (this.leaseHeld && this.opts.clock.now() >= this.leaseUntil) {
      this.leaseHeld = false;
      this.leaseLosses++;
      this.opts.logger.warn({ applied_seq: this.applied, latest_seq: this.knownLatest }, 'tenant feed lease lost: trusting no cached tenant state until current again');
    }
    if (now === this.wasCurrent) return;
    this.wasCurrent = now;
    if (now) this.opts.logger.info({ applied_seq: this.applied }, 'tenant feed current');
  }
}

function gaugeOf(read: () => number) {
  return function (this: Gauge) {
    this.set(read());
  };
}

function counterOf(read: () => number) {
  let reported = 0;
  return function (this: Counter) {
    const v = read();
    if (v > reported) this.inc(v - reported);
    reported = v;
  };
}
