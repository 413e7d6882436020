import { bySlot, createRedis, watchClusterSubscriber, watchShardedSubscribers, withTimeout, type Logger, type Redis, type RedisTarget, type ShardedSubscriberWatch } from '@service-relay/core';
import { isAfter, makeMessage, type ChannelRef, type Message, type MessageListener } from './message';
import type { HistoryPage } from './message-bus';

/**
 * REDIS_PUBSUB, resolved for one Redis URL: which live channel a publish goes
 * out on and which ones a process listens to (docs/OPERATIONS.md "Sharded
 * pub/sub"). `sharded` and `both` exist on a Cluster only.
 */
export type LivePath = 'plain' | 'sharded' | 'both';

/** What the live path needs of the bus: the stream, to refill a gap. */
export interface LiveHistory {
  readAfter(ref: ChannelRef, after: string, limit: number): Promise<HistoryPage>;
  connected(): Promise<void>;
}

interface Topic {
  ref: ChannelRef;
  key: string;
  /** `<p>msg:<tenant>:<channel>`: PUBLISH/SUBSCRIBE, reaches every node of a Cluster over its bus. */
  plain?: string;
  /** `<p>msg:{<tenant>:<channel>}`: SPUBLISH/SSUBSCRIBE, in the slot of the channel's stream. */
  sharded?: string;
  listeners: Set<MessageListener>;
  subscribed: Promise<unknown>;
  /** Last message delivered; later copies of it or older ones are dropped. */
  last: Message | undefined;
  /** While refilling after a lost subscription, live messages wait here. */
  parked: Message[] | undefined;
  /** The last message delivered when the subscription was lost (Cluster), where the refill starts. */
  resumeAfter?: string;
  /** Sharded: the node whose subscriber acknowledged the SSUBSCRIBE; undefined before that and once it is lost. */
  node?: string;
  /** Sharded: the first SSUBSCRIBE is out; a refill is running (`again`: a loss came meanwhile, run once more). */
  subscribing?: boolean;
  refilling?: boolean;
  again?: boolean;
  /** `both`: a read of the stream is running (`cueAgain`: another live message came meanwhile). */
  catchingUp?: boolean;
  cueAgain?: boolean;
}

const REFILL_PAGE = 500;
/** An SSUBSCRIBE answered with MOVED is never settled by ioredis 5.11: give up on it after this. */
const SSUBSCRIBE_TIMEOUT_MS = 5000;
/** A sharded refill that failed (the slot's master down, no replica promoted yet) is tried again this often. */
const RETRY_MS = 1000;

/**
 * The live half of the Redis message bus: one subscriber client per process;
 * a channel is subscribed when its first local listener arrives and
 * unsubscribed when the last one leaves. A subscription lost while Redis
 * stays up (a Cluster node gone, a sharded subscription dropped or moved)
 * holds the channel's live messages, reads the gap from the stream, then
 * releases them in order.
 */
export class RedisLiveTopics {
  private readonly sub: Redis;
  private readonly topics = new Map<string, Topic>();
  private readonly byName = new Map<string, Topic>();
  private wasReady = false;
  private lostSinceReady = false;
  private readonly stopPlainWatch: () => void;
  private readonly shards: ShardedSubscriberWatch | undefined;
  /** Sharded subscriptions lost per node (`''`: any node), to tell whether an SSUBSCRIBE's answer still stands. */
  private readonly losses = new Map<string, number>();
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    url: RedisTarget,
    private readonly prefix: string,
    readonly path: LivePath,
    private readonly store: LiveHistory,
    private readonly logger: Logger,
    onRedisError: () => void,
  ) {
    this.sub = createRedis(url, { connectionName: 'realtime-messages-sub', enableOfflineQueue: true, maxRetriesPerRequest: null }, { shardedSubscribers: path !== 'plain' });
    this.sub.on('error', (err: Error) => {
      onRedisError();
      this.logger.debug({ err: err.message }, 'message bus connection error');
    });
    this.sub.on('close', () => {
      if (this.wasReady) this.lostSinceReady = true;
      // ioredis stops its sharded subscribers quietly when the whole Cluster connection goes.
      if (this.shards) this.shardLost(undefined, true);
    });
    this.sub.on('ready', () => {
      this.wasReady = true;
      if (!this.lostSinceReady) return;
      this.lostSinceReady = false;
      if (path !== 'sharded') for (const topic of this.topics.values()) void this.refill(topic);
    });
    this.sub.on('message', (channel: string, payload: string) => this.onMessage(channel, payload));
    this.sub.on('smessage', (channel: string, payload: string) => this.onMessage(channel, payload));
    // On a Cluster the plain subscriber connection can move to another node without a 'close' here.
    this.stopPlainWatch =
      path === 'sharded'
        ? () => {}
        : watchClusterSubscriber(this.sub, {
            // Hold live messages from here: the next ones may arrive on the new connection before the refill reads the gap.
            lost: () => {
              for (const topic of this.topics.values()) hold(topic);
            },
            moved: () => {
              for (const topic of this.topics.values()) void this.refill(topic);
            },
          });
    this.shards = path === 'plain' ? undefined : watchShardedSubscribers(this.sub, { lost: (node) => this.shardLost(node), ready: () => this.shardReady() });
  }

  /** The live channel names a publish of `ref` goes out on. */
  names(ref: ChannelRef): { plain?: string; sharded?: string } {
    return {
      ...(this.path !== 'sharded' && { plain: `${this.prefix}msg:${ref.tenantId}:${ref.channel}` }),
      ...(this.path !== 'plain' && { sharded: `${this.prefix}msg:{${ref.tenantId}:${ref.channel}}` }),
    };
  }

  /** Resolves once the subscription is acknowledged; rejects if Redis could not take it. */
  subscribe(ref: ChannelRef, listener: MessageListener): { subscribed: Promise<unknown>; stop: () => void } {
    const key = `{${ref.tenantId}:${ref.channel}}`;
    let topic = this.topics.get(key);
    if (!topic) {
      // Left earlier in this tick: still subscribed, and it must stay so.
      this.leaving.delete(key);
      const t: Topic = { ref, key, ...this.names(ref), listeners: new Set(), subscribed: Promise.resolve(), last: undefined, parked: undefined };
      if (t.plain) this.byName.set(t.plain, t);
      if (t.sharded) this.byName.set(t.sharded, t);
      t.subscribed = Promise.all([t.plain && this.sub.subscribe(t.plain), t.sharded && this.firstShardedSubscribe(t)]);
      this.topics.set(key, t);
      topic = t;
    }
    const t = topic;
    t.listeners.add(listener);
    const stop = () => {
      t.listeners.delete(listener);
      if (t.listeners.size > 0 || this.topics.get(key) !== t) return;
      this.topics.delete(key);
      if (t.plain) this.byName.delete(t.plain);
      if (t.sharded) this.byName.delete(t.sharded);
      if (this.leaving.size === 0) setImmediate(this.unsubscribeLeaving);
      this.leaving.set(key, t);
    };
    return { subscribed: t.subscribed, stop };
  }

  /**
   * Channels whose last local listener left in this tick, unsubscribed at its
   * end: plain ones in one command (a tenant's disable closing 10,000
   * connections in 200 channels sent 200 UNSUBSCRIBEs, each a socket write,
   * ~13% of realtime's CPU for that disable: bench scale scenario, profiled);
   * sharded ones one command per slot, on the node serving it.
   */
  private readonly leaving = new Map<string, Topic>();

  private readonly unsubscribeLeaving = (): void => {
    if (this.leaving.size === 0) return;
    const topics = [...this.leaving.values()];
    this.leaving.clear();
    const plain = topics.flatMap((t) => (t.plain ? [t.plain] : []));
    if (plain.length > 0) this.sub.unsubscribe(...plain).catch(() => {});
    for (const group of bySlot(topics.flatMap((t) => (t.sharded ? [t.sharded] : [])))) this.sub.sunsubscribe(...group).catch(() => {});
  };

  ready(): boolean {
    return this.sub.status === 'ready';
  }

  close(): void {
    this.stopPlainWatch();
    this.shards?.stop();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.topics.clear();
    this.byName.clear();
    this.sub.disconnect();
  }

  private onMessage(channel: string, payload: string): void {
    const topic = this.byName.get(channel);
    if (!topic) return;
    const a = payload.indexOf('\n');
    const b = payload.indexOf('\n', a + 1);
    if (a < 0 || b < 0) return;
    const message = makeMessage(payload.slice(0, a), topic.ref.channel, payload.slice(a + 1, b), payload.slice(b + 1));
    if (topic.parked) topic.parked.push(message);
    else if (this.path === 'both' && topic.last) this.cue(topic, message);
    else deliver(topic, message);
  }

  /**
   * `both`: messages come over two paths (one copied over the cluster bus,
   * one not), and one publisher's may overtake an older one's on the other
   * path; a live message is then only a cue to read the stream after the
   * last one delivered, which holds every message up to it, in order.
   */
  private cue(topic: Topic, message: Message): void {
    if (!isAfter(message, topic.last!.ms, topic.last!.seq)) return;
    if (topic.catchingUp) {
      topic.cueAgain = true;
      return;
    }
    topic.catchingUp = true;
    void (async () => {
      try {
        for (let i = 0; i < 100 && (i === 0 || topic.cueAgain); i++) {
          topic.cueAgain = false;
          await this.readGap(topic, topic.last?.id);
        }
      } catch (err) {
        this.logger.warn({ err }, 'message bus: could not read a channel in order (REDIS_PUBSUB=both); delivering the live message as it came');
        deliver(topic, message);
      } finally {
        topic.catchingUp = false;
      }
    })();
  }

  /**
   * After a lost connection, messages published meanwhile never came over
   * pub/sub: read them from the stream, then release what arrived live.
   */
  private async refill(topic: Topic): Promise<void> {
    topic.parked ??= [];
    const resumeAfter = topic.resumeAfter;
    topic.resumeAfter = undefined;
    try {
      // The re-SUBSCRIBE must be acknowledged before reading, or a message
      // published between the read and the subscription would be lost.
      if (topic.plain) await this.sub.subscribe(topic.plain);
      await this.readGap(topic, resumeAfter ?? topic.last?.id);
    } catch (err) {
      this.logger.warn({ err }, 'could not refill a channel after reconnecting; messages may be missing');
    } finally {
      release(topic);
    }
  }

  private async readGap(topic: Topic, from: string | undefined): Promise<void> {
    await this.store.connected();
    let after = from;
    for (let page = 0; after !== undefined && page < 1000; page++) {
      const { messages, recovery } = await this.store.readAfter(topic.ref, after, REFILL_PAGE);
      if (recovery && !recovery.recovered) {
        this.logger.warn({ reason: recovery.reason, tenant_id: topic.ref.tenantId }, 'channel history lost while the message bus was disconnected');
      }
      for (const m of messages) deliver(topic, m);
      if (messages.length < REFILL_PAGE) break;
      after = messages[messages.length - 1]!.id;
    }
  }

  // --- Sharded pub/sub (Cluster) ---

  private lossesOf(node: string | undefined): number {
    return (this.losses.get('') ?? 0) + (node === undefined ? 0 : (this.losses.get(node) ?? 0));
  }

  /**
   * A sharded subscriber lost (`node`), or stopped (undefined: every channel
   * whose node no longer carries it). Synchronous, before a replacement can
   * deliver anything: live messages of those channels wait from here.
   */
  private shardLost(node: string | undefined, everything = false): void {
    this.losses.set(node ?? '', (this.losses.get(node ?? '') ?? 0) + 1);
    let held = false;
    for (const t of this.topics.values()) {
      if (!t.sharded) continue;
      const gone = everything || (node !== undefined ? t.node === node : t.node !== undefined && !this.carries(t));
      if (!gone) continue;
      hold(t);
      t.node = undefined;
      if (t.refilling) t.again = true;
      held = true;
    }
    // ioredis normally rebuilds and says so (shardReady); if it does not, the held channels are tried again from here.
    if (held) this.retrySoon();
  }

  /** ioredis has (re)built its sharded subscribers: every channel not carried as acknowledged is subscribed again and refilled. */
  private shardReady(): void {
    for (const t of this.topics.values()) {
      if (!t.sharded || t.subscribing || (t.node !== undefined && this.carries(t))) continue;
      hold(t);
      t.node = undefined;
      void this.refillSharded(t);
    }
  }

  private carries(t: Topic): boolean {
    return t.node !== undefined && this.shards!.nodeOf(t.sharded!) === t.node && this.shards!.live(t.node);
  }

  /**
   * SSUBSCRIBE; the node that acknowledged it, with its loss count then
   * (undefined if a loss came in between: do it again). A loss counted on
   * that node later means the subscription went after all.
   */
  private async ssubscribe(t: Topic): Promise<{ node: string; losses: number } | undefined> {
    const name = t.sharded!;
    const before = this.shards!.nodeOf(name);
    const losses = this.lossesOf(before);
    await withTimeout(this.sub.ssubscribe(name), SSUBSCRIBE_TIMEOUT_MS);
    const node = this.shards!.nodeOf(name);
    if (node === undefined || node !== before || this.lossesOf(node) !== losses || !this.shards!.live(node)) return undefined;
    return { node, losses };
  }

  private async firstShardedSubscribe(t: Topic): Promise<void> {
    t.subscribing = true;
    try {
      t.node = (await this.ssubscribe(t))?.node;
    } finally {
      t.subscribing = false;
    }
    // Acknowledged, but a subscriber was lost or rebuilt meanwhile: subscribe again (nothing to read: nothing was delivered yet).
    if (t.node === undefined && this.topics.get(t.key) === t) void this.refillSharded(t);
  }

  /** Holds the channel, SSUBSCRIBEs it again, reads the gap, releases; on failure it stays held and is tried again. */
  private async refillSharded(t: Topic): Promise<void> {
    if (t.refilling) {
      t.again = true;
      return;
    }
    t.refilling = true;
    try {
      for (let attempt = 0; attempt < 3 && this.topics.get(t.key) === t; attempt++) {
        t.again = false;
        hold(t);
        try {
          const on = await this.ssubscribe(t);
          if (on === undefined || t.again) continue;
          // The SSUBSCRIBE is acknowledged before the read: a message published after the read arrives live.
          await this.readGap(t, t.resumeAfter ?? t.last?.id);
          if (t.again || this.lossesOf(on.node) !== on.losses) continue;
          t.node = on.node;
          t.resumeAfter = undefined;
          release(t);
          return;
        } catch (err) {
          this.logger.debug({ err: (err as Error).message }, 'message bus: a sharded subscription could not be refilled yet');
        }
      }
      if (this.topics.get(t.key) !== t) return;
      this.warnHeld();
      this.retrySoon();
    } finally {
      t.refilling = false;
    }
  }

  private lastHeldWarning = 0;

  private warnHeld(): void {
    if (Date.now() - this.lastHeldWarning < 10_000) return;
    this.lastHeldWarning = Date.now();
    this.logger.warn('message bus: live messages of some channels are held until their sharded subscription is back (the slot\'s master is unreachable); what was published meanwhile is read from the stream once it is back');
  }

  private retrySoon(): void {
    this.retryTimer ??= setTimeout(() => {
      this.retryTimer = undefined;
      for (const t of this.topics.values()) if (t.sharded && t.node === undefined && !t.subscribing) void this.refillSharded(t);
    }, RETRY_MS).unref();
  }
}

function hold(topic: Topic): void {
  if (topic.parked) return;
  topic.parked = [];
  topic.resumeAfter = topic.last?.id;
}

function release(topic: Topic): void {
  const parked = topic.parked ?? [];
  topic.parked = undefined;
  for (const m of parked) deliver(topic, m);
}

function deliver(topic: Topic, m: Message): void {
  if (topic.last && !isAfter(m, topic.last.ms, topic.last.seq)) return;
  topic.last = m;
  for (const listener of topic.listeners) {
    try {
      listener(m);
    } catch {
      // One failing listener must not starve the others.
    }
  }
}
