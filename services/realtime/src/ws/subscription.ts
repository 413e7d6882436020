import { parseMessageId } from '../messaging/message-id';
import { isAfter, messageFrame, type ChannelRef, type Message } from '../messaging/message';
import type { HistoryPage, MessageBus } from '../messaging/message-bus';
import type { TopicSubscriber } from '../topics/topic-hub';

const REPLAY_PAGE = 500;
const ALWAYS = () => true;

/** A subscription on a presence channel: a member (once joined), and a watcher of joins and leaves when allowed. */
export interface SubscriptionPresence {
  watching: boolean;
  joined: boolean;
}

/** Where a subscription's frames go (the connection). */
export interface FrameSink {
  /** `message`: a channel message (counted as a delivery), not a presence event. */
  sendMessage(frame: Buffer | string, message?: boolean): void;
}

/**
 * One topic on one connection. It starts parked: live messages are held while
 * missed ones are replayed from history, then the held ones newer than the
 * last replayed id are sent and delivery goes direct. Ids only ever increase
 * on the wire, so nothing is sent twice and, because the live subscription was
 * in place before history was read, nothing is skipped.
 */
export class Subscription implements TopicSubscriber {
  private parked: { message: Message; frame: Buffer }[] | undefined = [];
  // Position of the last message sent; ids start above 0-0.
  private lastMs = 0;
  private lastSeq = -1;
  cancelled = false;
  /** Set on presence channels only. */
  presence: SubscriptionPresence | undefined = undefined;

  constructor(
    readonly topic: string,
    readonly ref: ChannelRef,
    private readonly sink: FrameSink,
  ) {}

  deliver(message: Message, frame: Buffer): void {
    if (this.parked) this.parked.push({ message, frame });
    else this.send(message, frame);
  }

  /**
   * Sends every retained message after `after`; call only after the live
   * subscription is in place. The first page (with the epoch and whether
   * recovery is complete) goes to `announce` before any message is sent.
   * Stops when `serving` says no (it then closed the connection). Returns how
   * many messages it replayed.
   */
  async replay(messages: MessageBus, after: string, epoch: string | undefined, announce: (first: HistoryPage) => void, serving: () => boolean = ALWAYS, ttlS?: number): Promise<number> {
    // The client has everything up to `after`: a live copy of such a message is not sent either.
    const start = parseMessageId(after)!;
    this.lastMs = start.ms;
    this.lastSeq = start.seq;
    let cursor = after;
    let sent = 0;
    for (let first = true; ; first = false) {
      const read = await messages.history(this.ref, { after: cursor, limit: REPLAY_PAGE, ...(first && epoch !== undefined && { epoch }), ...(ttlS !== undefined && { ttlS }) });
      // Checked after every read: the instance may have stopped vouching for its connections meanwhile (FeedCutoff).
      if (this.cancelled || !serving()) return sent;
      if (first) announce(read);
      const page = read.messages;
      for (const m of page) this.send(m, messageFrame(this.topic, m));
      sent += page.length;
      if (page.length < REPLAY_PAGE) return sent;
      cursor = page[page.length - 1]!.id;
      // Caught up with what arrived live: the parked messages cover the rest.
      const firstParked = this.parked?.[0];
      if (firstParked && !isAfter(firstParked.message, this.lastMs, this.lastSeq)) return sent;
    }
  }

  /** Releases parked messages and delivers directly from now on. */
  goLive(): void {
    const parked = this.parked ?? [];
    this.parked = undefined;
    for (const { message, frame } of parked) this.send(message, frame);
  }

  private send(m: Message, frame: Buffer | string): void {
    if (this.cancelled || !isAfter(m, this.lastMs, this.lastSeq)) return;
    this.lastMs = m.ms;
    this.lastSeq = m.seq;
    this.sink.sendMessage(frame, true);
  }
}
