import type { WebhookEventRecord } from './webhook-event';

/** At most this many events wait in memory for the sender; past it the oldest are dropped (and counted). */
const MAX_QUEUED = 100_000;

/**
 * The embedded default's hand-over of events from realtime to the registry's
 * sender, in one process (`npm start` shares one): realtime's in-process
 * stores `push`, the sender `take`s a batch and writes it to its database on
 * disk. Events are in memory only between the two (docs/OPERATIONS.md
 * "Webhooks").
 */
export class InProcessWebhookEvents {
  private queue: WebhookEventRecord[] = [];
  private waiter: (() => void) | undefined;
  dropped = 0;

  readonly push = (record: WebhookEventRecord): void => {
    if (this.queue.length >= MAX_QUEUED) {
      this.queue.shift();
      this.dropped += 1;
    }
    this.queue.push(record);
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  };

  /** Up to `max` events in the order they were pushed, waiting at most `waitMs` for the first. */
  async take(max: number, waitMs: number): Promise<WebhookEventRecord[]> {
    if (this.queue.length === 0 && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.waiter = undefined;
          resolve();
        }, waitMs);
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return this.queue.splice(0, max);
  }

  /** Puts events taken but not stored back at the front, in order. */
  giveBack(records: readonly WebhookEventRecord[]): void {
    this.queue.unshift(...records);
  }
}
