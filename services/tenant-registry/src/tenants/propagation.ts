import { monotonicClock, type Clock, type Logger } from '@service-relay/core';
import type { TenantEventBus } from '@service-relay/tenant-events';
import type { FeedMirror } from '../feed-mirror/feed-mirror';
import type { FeedStore, PendingConsumer } from '../store/feed-store';
import type { CommittedChangeEvent } from './tenant';

export interface PropagationResult {
  /** Every consumer applied the change, or provably stopped trusting its caches. */
  confirmed: boolean;
  /** Consumers that may still act on older state (when not confirmed). */
  pending: PendingConsumer[];
  waitedMs: number;
}

/**
 * A consumer's lease runs from when it sent a request, on its own clock; the
 * database records the request a little later. This covers clock-rate
 * differences between the two over a lease of a few seconds.
 */
const LEASE_MARGIN_MS = 100;
/** Re-check this often even without a report from a consumer (another replica may have taken it). */
const RECHECK_MS = 100;

/**
 * Waits until a committed change is in force on every consumer of the tenant
 * feed: each one has reported applying it, or has been silent for longer than
 * its lease (so it trusts no cache any more and will apply the change before
 * it trusts one again). The registry also announces every change and, every
 * `heartbeatMs`, the latest sequence on the bus, so consumers pull at once.
 */
export class Propagation {
  private readonly wakers = new Set<() => void>();
  private heartbeat: NodeJS.Timeout | undefined;
  private repairFailing = false;

  constructor(
    private readonly feed: FeedStore,
    private readonly bus: TenantEventBus,
    private readonly logger: Logger,
    private readonly timeoutMs: number,
    private readonly clock: Clock = monotonicClock,
    /** The feed mirror (with Redis): every change reaches it before its call waits. */
    private readonly mirror?: FeedMirror,
  ) {}

  /** A consumer reported progress (called by the feed service). */
  progressed(): void {
    for (const wake of [...this.wakers]) wake();
  }

  announce(seq: number): void {
    this.bus.notify(seq).catch((err: unknown) => this.logger.debug({ err: (err as Error).message, seq }, 'tenant feed notice not sent; consumers pick the change up by polling'));
  }

  startHeartbeat(heartbeatMs: number): void {
    this.heartbeat = setInterval(() => {
      this.feed.latestSeq().then(
        (seq) => this.announce(seq),
        () => {},
      );
      // Every replica keeps the mirror level with the outbox: a change whose
      // own append failed (Redis blinked), or a mirror Redis lost, is back within a beat.
      void this.repairMirror();
    }, heartbeatMs);
    this.heartbeat.unref();
  }

  /**
   * One repair of the mirror. The first failure after a success is a warning
   * (a mirror that was never started holds nothing to serve a PostgreSQL
   * outage from: /readyz says so, `feed_mirror`); the rest of a run of
   * failures is debug, and the recovery is logged.
   */
  async repairMirror(): Promise<void> {
    if (!this.mirror) return;
    try {
      await this.mirror.repair(this.feed);
      if (this.repairFailing) this.logger.info('feed mirror repaired');
      this.repairFailing = false;
    } catch (err) {
      const message = (err as Error).message;
      if (this.repairFailing) this.logger.debug({ err: message }, 'feed mirror repair failed');
      else this.logger.warn({ err: message }, 'feed mirror repair failed (retried every heartbeat)');
      this.repairFailing = true;
    }
  }

  stop(): void {
    clearInterval(this.heartbeat);
    for (const wake of [...this.wakers]) wake();
  }

  awaitInForce(tenantId: string, change: CommittedChangeEvent): Promise<PropagationResult> {
    return this.awaitAllInForce([{ tenantId, event: change }]);
  }

  /**
   * Several changes committed together (a plan change: one per tenant on the
   * plan): consumers apply the feed in order, so the last one in force means all are.
   */
  async awaitAllInForce(changes: ReadonlyArray<{ tenantId: string; event: CommittedChangeEvent }>): Promise<PropagationResult> {
    const started = this.clock.now();
    if (changes.length === 0) return { confirmed: true, pending: [], waitedMs: 0 };
    const seq = Math.max(...changes.map((c) => c.event.seq));
    const deadline = started + this.timeoutMs;
    // Leases granted from the mirror while this change was not in it yet may
    // run until then; they are waited out (no consumer reports them).
    const mirroredLeasesEnd = started + (await this.toMirror(changes));
    this.announce(seq);
    let pending: PendingConsumer[] = [];
    // Bounded by the deadline; each turn waits for a report or RECHECK_MS.
    for (;;) {
      let known = false;
      try {
        pending = await this.feed.pendingConsumers(seq, LEASE_MARGIN_MS);
        known = true;
      } catch (err) {
        this.logger.warn({ err: (err as Error).message, seq }, 'could not read consumer progress');
      }
      const now = this.clock.now();
      if (known && pending.length === 0 && now >= mirroredLeasesEnd) return { confirmed: true, pending, waitedMs: now - started };
      if (now >= deadline) return { confirmed: false, pending, waitedMs: now - started };
      await this.nextReport(Math.min(RECHECK_MS, deadline - now, Math.max(1, mirroredLeasesEnd - now)));
    }
  }

  /**
   * Appends the committed change to the mirror; returns how long leases
   * granted from the mirror may still run. A mirror that cannot be reached
   * (Redis down or frozen) grants none meanwhile: a registry answers from it
   * only while PostgreSQL is down, and this change just committed there.
   */
  private async toMirror(changes: ReadonlyArray<{ tenantId: string; event: CommittedChangeEvent }>): Promise<number> {
    if (!this.mirror) return 0;
    try {
      const r = await this.mirror.append(
        changes.map(({ tenantId, event: c }) => ({ seq: c.seq, tenantId, kind: c.kind, version: c.version, revokedKeyVersions: c.revokedKeyVersions, ...(c.detail !== undefined && { detail: c.detail }) })),
      );
      return r.degradedForMs;
    } catch (err) {
      this.logger.debug({ err: (err as Error).message, seq: changes[0]?.event.seq }, 'feed mirror append failed; the heartbeat repairs it');
      return 0;
    }
  }

  private nextReport(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakers.add(done);
    });
  }
}
