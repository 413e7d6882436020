import { RelayError } from '@service-relay/core';

/**
 * Bounds registry fetches in flight, with a bounded queue behind them. A flood
 * of checks naming random tenants (each one a miss) then costs the registry at
 * most `concurrency` lookups at a time; the overflow fails closed.
 */
export class FetchLimiter {
  private active = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly concurrency: number,
    private readonly maxQueued: number,
  ) {}

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active >= this.concurrency) {
      if (this.queue.length >= this.maxQueued) throw new RelayError('unavailable', 'too many key fetches queued');
      await new Promise<void>((resolve) => this.queue.push(resolve));
    } else {
      this.active++;
    }
    try {
      return await task();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.active--;
    }
  }
}
