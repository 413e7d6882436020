import type { RelayClientError } from './client-error.js';
import type { ServerFrame } from './frames.js';
import { SeenIds } from './message-ids.js';
import type { SubscribeOptions, Subscribed } from './types.js';

/**
 * A subscription with nothing delivered yet renews from the start of what the
 * server retains, so what was published while the client was away is not lost.
 */
const FROM_THE_START = '0-0';

/** One channel the app subscribed to: where it is in the channel, and who waits for its first `subscribed`. */
export class Subscription {
  /** The last id delivered (the next `after`) and the recent ones (no message twice). */
  readonly seen: SeenIds;
  /** The epoch the server last told (sent back with `after`). */
  epoch: string | undefined;
  /** The last `subscribed`, once there was one. */
  confirmed: Subscribed | undefined;
  /** The ref of the subscribe frame in flight on the current connection. */
  ref: string | undefined;
  /** `unavailable`/`internal` answers in a row. */
  retries = 0;
  private waiters: { resolve: (s: Subscribed) => void; reject: (e: RelayClientError) => void }[] = [];

  constructor(
    readonly channel: string,
    readonly options: SubscribeOptions,
  ) {
    this.seen = new SeenIds(options.after);
    this.epoch = options.epoch;
  }

  whenConfirmed(): Promise<Subscribed> {
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  get waiting(): boolean {
    return this.waiters.length > 0;
  }

  /** The subscribe frame for this connection: `after` = the last id delivered, `epoch` with it, `member` always. */
  frame(topic: string, ref: string): Record<string, unknown> {
    const after = this.seen.last ?? (this.confirmed ? FROM_THE_START : undefined);
    const epoch = this.epoch === '' ? undefined : this.epoch;
    return {
      type: 'subscribe',
      topic,
      ...(after !== undefined && { after }),
      ...(after !== undefined && epoch !== undefined && { epoch }),
      ...(this.options.member !== undefined && { member: this.options.member }),
      ref,
    };
  }

  /** Records a `subscribed` and returns what the app is told. */
  confirm(frame: Extract<ServerFrame, { type: 'subscribed' }>): Subscribed {
    const info: Subscribed = {
      channel: this.channel,
      topic: frame.topic,
      epoch: frame.epoch,
      ...(frame.recovered !== undefined && { recovered: frame.recovered }),
      ...(frame.reason !== undefined && { reason: frame.reason }),
      resubscribed: this.confirmed !== undefined,
    };
    this.ref = undefined;
    this.retries = 0;
    this.epoch = frame.epoch;
    this.confirmed = info;
    return info;
  }

  settle(info: Subscribed): void {
    for (const w of this.waiters.splice(0)) w.resolve(info);
  }

  fail(error: RelayClientError): void {
    for (const w of this.waiters.splice(0)) w.reject(error);
  }
}
