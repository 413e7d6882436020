import type { Logger } from '../logger';
import { mergeRecord, type UsageMeter, type UsageRecord } from './usage-meter';

/** One flush as sent: the same id on every retry, so the registry applies it once. */
export interface UsageFlush {
  flushId: string;
  instanceId: string;
  records: UsageRecord[];
}

/** Hands a flush to the store (the registry's Usage.Flush); rejects when it may not have been applied. */
export type UsageSink = (flush: UsageFlush) => Promise<void>;

export interface UsageFlusherOptions {
  meter: UsageMeter;
  sink: UsageSink;
  instanceId: string;
  intervalMs: number;
  /** Tenant-hours held while the registry does not take flushes; past it new counts are dropped (and counted). */
  maxPendingRecords: number;
  logger: Logger;
  /** Each record as it is cut (Prometheus export). */
  onCut?: (records: readonly UsageRecord[]) => void;
  onFlush?: (result: 'ok' | 'failed' | 'dropped', records: number) => void;
  /** How long stop() keeps trying the final flush. */
  finalDeadlineMs?: number;
}

/**
 * Sends the meter's counts every interval. A flush that fails is kept under
 * its id and sent again at the next tick; what is counted meanwhile gathers
 * in one pending set (merged per tenant and hour, bounded), sealed into the
 * next flush once the kept one is through. At stop, the last counts are cut
 * and sent (the final flush: a SIGTERM loses nothing while the registry answers).
 */
export class UsageFlusher {
  private pending = new Map<string, UsageRecord>();
  private sealed: UsageFlush | undefined;
  private inFlight: Promise<void> | undefined;
  private seq = 0;
  private ticker: NodeJS.Timeout | undefined;
  private hourTimer: NodeJS.Timeout | undefined;
  private droppedLogged = false;

  constructor(private readonly opts: UsageFlusherOptions) {}

  start(): void {
    this.ticker = setInterval(() => void this.flush(), this.opts.intervalMs);
    this.ticker.unref();
    this.armHour();
  }

  /** Cuts the counts and sends what is due; resolves when that attempt ended (it never rejects). */
  flush(): Promise<void> {
    this.take();
    return this.send();
  }

  /** Stops the timers and sends everything counted, trying until finalDeadlineMs. */
  async stop(): Promise<void> {
    clearInterval(this.ticker);
    clearTimeout(this.hourTimer);
    const deadline = Date.now() + (this.opts.finalDeadlineMs ?? 3000);
    this.take();
    // Bounded: at most one kept flush and one more, each tried until the deadline.
    for (let attempt = 0; attempt < 20 && (this.sealed || this.pending.size > 0) && Date.now() < deadline; attempt++) {
      // An attempt that hangs (a registry that does not answer) is not waited for past the deadline.
      await within(this.send(), deadline - Date.now());
      if (this.sealed && Date.now() < deadline) await within(new Promise<void>(() => {}), Math.min(100, deadline - Date.now()));
    }
    if (this.sealed || this.pending.size > 0) {
      this.opts.logger.warn({ records: (this.sealed?.records.length ?? 0) + this.pending.size }, 'usage: final flush failed; these counts are lost');
    }
  }

  /** Tenant-hours waiting (kept flush and pending). */
  get backlog(): number {
    return (this.sealed?.records.length ?? 0) + this.pending.size;
  }

  private armHour(): void {
    this.hourTimer = setTimeout(() => {
      // A period never spans two hours: the boundary cuts (sending waits for the next tick).
      this.take();
      this.armHour();
    }, this.opts.meter.msToNextHour() + 1);
    this.hourTimer.unref();
  }

  private take(): void {
    const records = this.opts.meter.cut();
    if (records.length === 0) return;
    this.opts.onCut?.(records);
    let dropped = 0;
    for (const r of records) {
      const key = `${r.hourMs}|${r.tenantId}`;
      const seen = this.pending.get(key);
      if (seen) mergeRecord(seen, r);
      else if (this.backlog < this.opts.maxPendingRecords) this.pending.set(key, r);
      else dropped += 1;
    }
    if (dropped > 0) {
      this.opts.onFlush?.('dropped', dropped);
      if (!this.droppedLogged) this.opts.logger.warn({ dropped }, 'usage: too many counts waiting for the registry; new ones are dropped');
      this.droppedLogged = true;
    }
  }

  private send(): Promise<void> {
    if (this.inFlight) return this.inFlight;
    if (!this.sealed) {
      if (this.pending.size === 0) return Promise.resolve();
      this.seq += 1;
      this.sealed = { flushId: `${this.opts.instanceId}:${this.seq}`, instanceId: this.opts.instanceId, records: [...this.pending.values()] };
      this.pending = new Map();
    }
    const flush = this.sealed;
    this.inFlight = this.opts.sink(flush).then(
      () => {
        this.sealed = undefined;
        this.droppedLogged = false;
        this.opts.onFlush?.('ok', flush.records.length);
      },
      (err: unknown) => {
        this.opts.onFlush?.('failed', flush.records.length);
        this.opts.logger.warn({ err: (err as Error).message, flush_id: flush.flushId, records: flush.records.length }, 'usage flush failed; kept for the next attempt');
      },
    );
    return this.inFlight.finally(() => {
      this.inFlight = undefined;
    });
  }
}

/** Resolves when `p` does or after `ms`, whichever comes first (the timer is cleared). */
function within(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, ms));
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
