import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

export interface LoadShedderOptions {
  /** Requests admitted and not yet answered; past it new ones are shed. */
  maxInFlight: number;
  /** Shed while the event loop's delay (p99 over the last sample) is above this; 0 turns the check off. */
  maxEventLoopDelayMs: number;
  /** How often the delay is sampled (default 250 ms). */
  sampleMs?: number;
}

export type ShedReason = 'in_flight' | 'event_loop_delay';

/**
 * Refuses new work cheaply before the process falls behind: a bound on
 * requests in flight, and the event loop's delay (perf_hooks'
 * monitorEventLoopDelay), which grows when the process cannot keep up with
 * what it accepts, long before the kernel's accept queue overflows. A shed
 * request costs one comparison and a fixed answer; no verifier, registry or
 * upstream call.
 */
export class LoadShedder {
  private inFlight = 0;
  private lagging = false;
  private lastDelayMs = 0;
  private readonly histogram: IntervalHistogram | undefined;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: LoadShedderOptions) {
    if (opts.maxEventLoopDelayMs > 0) {
      this.histogram = monitorEventLoopDelay({ resolution: 10 });
      this.histogram.enable();
      this.timer = setInterval(() => this.sample(), opts.sampleMs ?? 250);
      this.timer.unref();
    }
  }

  /** Why a new request must be shed now, or undefined to admit it (then call done() once it is answered). */
  shed(): ShedReason | undefined {
    if (this.inFlight >= this.opts.maxInFlight) return 'in_flight';
    if (this.lagging) return 'event_loop_delay';
    this.inFlight += 1;
    return undefined;
  }

  done(): void {
    this.inFlight -= 1;
  }

  get current(): { inFlight: number; eventLoopDelayMs: number; lagging: boolean } {
    return { inFlight: this.inFlight, eventLoopDelayMs: this.lastDelayMs, lagging: this.lagging };
  }

  /** For tests: judge a delay as if it had been sampled. */
  judge(delayMs: number): void {
    this.lastDelayMs = delayMs;
    this.lagging = this.opts.maxEventLoopDelayMs > 0 && delayMs > this.opts.maxEventLoopDelayMs;
  }

  private sample(): void {
    const h = this.histogram!;
    this.judge(h.count > 0 ? h.percentile(99) / 1e6 : 0);
    h.reset();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.histogram?.disable();
  }
}
