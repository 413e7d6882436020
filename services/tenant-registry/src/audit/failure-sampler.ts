import type { Clock } from '@service-relay/core';

export type SampleVerdict =
  /** Write this one; `suppressed` were dropped since the last one written. */
  | { record: true; suppressed: number }
  /** Count it only; `firstInWindow` is the first dropped in this window (log it once). */
  | { record: false; firstInWindow: boolean };

/**
 * At most `perWindow` events written per fixed window; the rest are counted
 * and the count rides on the next event written. Bounds what a flood of
 * failed authentications can add to the audit log, whatever its source.
 */
export class FailureSampler {
  private windowStart = Number.NEGATIVE_INFINITY;
  private inWindow = 0;
  private droppedInWindow = 0;
  private droppedSinceWritten = 0;

  constructor(
    private readonly perWindow: number,
    private readonly windowMs: number,
    private readonly clock: Clock,
  ) {}

  take(): SampleVerdict {
    const now = this.clock.now();
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.inWindow = 0;
      this.droppedInWindow = 0;
    }
    if (this.inWindow < this.perWindow) {
      this.inWindow += 1;
      const suppressed = this.droppedSinceWritten;
      this.droppedSinceWritten = 0;
      return { record: true, suppressed };
    }
    this.droppedInWindow += 1;
    this.droppedSinceWritten += 1;
    return { record: false, firstInWindow: this.droppedInWindow === 1 };
  }

  /** Dropped and not yet carried by a written event (for a final log line). */
  get pending(): number {
    return this.droppedSinceWritten;
  }
}
