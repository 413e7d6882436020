import { messageFrame, type ChannelRef, type Message } from '../messaging/message';
import type { MessageBus } from '../messaging/message-bus';

/** One local receiver of a topic (a connection's subscription). */
export interface TopicSubscriber {
  /** `frame` is the ready `message` frame, shared by every subscriber of the topic. */
  deliver(message: Message, frame: Buffer): void;
}

export interface FanOutObserver {
  /** Called once per message per process with how many local subscribers got it. */
  fannedOut(subscribers: number, publishedAtMs: number): void;
}

const ALWAYS = () => true;

/** Told when this process's first subscriber of a channel arrives and after its last leaves (webhook occupancy, #32). */
export interface LocalOccupancy {
  occupied(ref: ChannelRef): void;
  vacated(ref: ChannelRef): void;
}

interface TopicEntry {
  ref: ChannelRef;
  subscribers: Set<TopicSubscriber>;
  live: Promise<void>;
  stop: (() => void) | undefined;
}

/**
 * The process's local subscribers per topic. The message bus sees one
 * listener per topic, and each message is serialized into a frame once, then
 * handed as the same bytes to every subscriber.
 */
export class TopicHub {
  private readonly topics = new Map<string, TopicEntry>();

  constructor(
    private readonly bus: MessageBus,
    private readonly observer?: FanOutObserver,
    /**
     * False while this instance cannot vouch for its connections (FeedCutoff,
     * which then closes them): the message goes to nobody. Asked once per
     * message and topic, not per subscriber.
     */
    private readonly serving: () => boolean = ALWAYS,
    private readonly occupancy?: LocalOccupancy,
  ) {}

  /** Adds the subscriber at once; resolves when delivery from the bus is live. */
  async join(topic: string, ref: ChannelRef, subscriber: TopicSubscriber): Promise<void> {
    let entry = this.topics.get(topic);
    if (!entry) {
      const created: TopicEntry = { ref, subscribers: new Set(), live: Promise.resolve(), stop: undefined };
      created.live = this.bus.subscribe(ref, (m) => this.fanOut(topic, created, m)).then(
        (stop) => {
          created.stop = stop;
          // Everyone left while the subscription was being set up.
          if (this.topics.get(topic) !== created) stop();
        },
        (err: unknown) => {
          if (this.topics.get(topic) === created) {
            this.topics.delete(topic);
            this.occupancy?.vacated(ref);
          }
          throw err;
        },
      );
      this.topics.set(topic, created);
      this.occupancy?.occupied(ref);
      entry = created;
    }
    entry.subscribers.add(subscriber);
    try {
      await entry.live;
    } catch (err) {
      entry.subscribers.delete(subscriber);
      throw err;
    }
  }

  leave(topic: string, subscriber: TopicSubscriber): void {
    const entry = this.topics.get(topic);
    if (!entry || !entry.subscribers.delete(subscriber) || entry.subscribers.size > 0) return;
    this.topics.delete(topic);
    entry.stop?.();
    if (this.occupancy) this.occupancy.vacated(entry.ref);
  }

  /** Topics with at least one local subscriber. */
  get size(): number {
    return this.topics.size;
  }

  /** The `n` topics with the most local subscribers, most first (the operator console's Live page). */
  busiest(n: number): Array<{ ref: ChannelRef; subscribers: number }> {
    return [...this.topics.values()]
      .map((e) => ({ ref: e.ref, subscribers: e.subscribers.size }))
      .sort((a, b) => b.subscribers - a.subscribers || a.ref.tenantId.localeCompare(b.ref.tenantId) || a.ref.channel.localeCompare(b.ref.channel))
      .slice(0, n);
  }

  private fanOut(topic: string, entry: TopicEntry, message: Message): void {
    if (entry.subscribers.size === 0 || !this.serving()) return;
    const frame = Buffer.from(messageFrame(topic, message));
    for (const s of entry.subscribers) s.deliver(message, frame);
    this.observer?.fannedOut(entry.subscribers.size, message.ms);
  }
}
