import { createRedis, isCluster, RelayError, redisPing, redisReady, waitForReplica, watchClusterSubscriber, type Logger, type Redis, type RedisTarget } from '@service-relay/core';
import { ClusterUnconfirmed } from './cluster-unconfirmed';
import { isAfter, makeMessage, type ChannelRef, type Message, type MessageListener } from './message';
import type { HistoryPage, HistoryQuery, MessageBus, PublishOptions } from './message-bus';
import type { RetentionOptions } from './memory-message-bus';
import { parseMessageId } from './message-id';
import { HistoryGeneration, type Generation } from './redis-history-generation';
import { PUBLISH_SCRIPT, READ_SCRIPT } from './redis-scripts';
import { globLiteral, unlinkMatching } from '../purge/redis-scan';
import { judgeRecovery, newEpoch, NO_EPOCH, type EpochState } from './recovery';

type StreamEntry = [id: string, fields: string[]];

interface Topic {
  ref: ChannelRef;
  listeners: Set<MessageListener>;
  subscribed: Promise<unknown>;
  /** Last message delivered; later copies of it or older ones are dropped. */
  last: Message | undefined;
  /** While refilling after a reconnect, live messages wait here. */
  parked: Message[] | undefined;
  /** The last message delivered when the subscription was lost (Cluster), where the refill starts. */
  resumeAfter?: string;
}

type PublishReply = [id: string, duplicate: 0 | 1, fields?: string[]];
type ReadReply = [
  exists: 0 | 1,
  timeS: string,
  timeUs: string,
  epoch?: string | null,
  since?: string | null,
  maxDeleted?: string,
  trimmedTo?: string | null,
  entries?: StreamEntry[],
];

interface ReadResult {
  /** Redis's clock, the one that made the ids. */
  nowMs: number;
  /** Undefined when there is no stream. */
  stream: EpochState | undefined;
  entries: StreamEntry[];
}

interface Scripts {
  relayPublish(numKeys: number, ...keysAndArgs: (string | number)[]): Promise<PublishReply>;
  relayRead(stream: string, meta: string, after: string, limit: number, gen: string, adopt: string, epoch: string): Promise<ReadReply>;
}

const REFILL_PAGE = 500;
const ZERO = Object.freeze({ ms: 0, seq: 0 });

/**
 * Redis Streams keep ids and history; pub/sub carries live delivery. One
 * subscriber connection per process: a channel is SUBSCRIBEd when its first
 * local listener arrives and UNSUBSCRIBEd when the last one leaves.
 */
export class RedisMessageBus implements MessageBus {
  private readonly cmd: Redis & Scripts;
  private readonly sub: Redis;
  private readonly topics = new Map<string, Topic>();
  private wasReady = false;
  private lostSinceReady = false;
  private readonly generation: HistoryGeneration;

  constructor(
    url: RedisTarget,
    private readonly prefix: string,
    private readonly retention: RetentionOptions,
    private readonly logger: Logger,
    private readonly idempotencyWindowS = 600,
    onRedisError: (connection: 'commands' | 'subscriber') => void = () => {},
  ) {
    this.cmd = createRedis(url, { connectionName: 'realtime-messages' }) as Redis & Scripts;
    // Without numberOfKeys the key count is the first argument: the idempotency key is optional.
    this.cmd.defineCommand('relayPublish', { lua: PUBLISH_SCRIPT });
    this.cmd.defineCommand('relayRead', { numberOfKeys: 2, lua: READ_SCRIPT });
    this.cmd.on('error', () => onRedisError('commands'));
    this.generation = new HistoryGeneration(this.cmd, `${prefix}{history}:generation`, logger);
    this.unconfirmed = isCluster(this.cmd) ? new ClusterUnconfirmed(this.cmd, logger) : undefined;
    this.sub = createRedis(url, { connectionName: 'realtime-messages-sub', enableOfflineQueue: true, maxRetriesPerRequest: null });
    this.sub.on('error', (err: Error) => {
      onRedisError('subscriber');
      this.logger.debug({ err: err.message }, 'message bus connection error');
    });
    this.sub.on('close', () => {
      if (this.wasReady) this.lostSinceReady = true;
    });
    this.sub.on('ready', () => {
      this.wasReady = true;
      if (!this.lostSinceReady) return;
      this.lostSinceReady = false;
      for (const [channel, topic] of this.topics) void this.refill(channel, topic);
    });
    this.sub.on('message', (channel: string, payload: string) => this.onMessage(channel, payload));
    // On a Cluster the subscriber connection can move to another node without a 'close' here.
    this.stopWatch = watchClusterSubscriber(this.sub, {
      lost: () => {
        // Hold live messages from here: the next ones may arrive on the new connection before the refill reads the gap.
        for (const topic of this.topics.values()) {
          if (topic.parked) continue;
          topic.parked = [];
          topic.resumeAfter = topic.last?.id;
        }
      },
      moved: () => {
        for (const [channel, topic] of this.topics) void this.refill(channel, topic);
      },
    });
  }

  private readonly stopWatch: () => void;

  async publish(ref: ChannelRef, userId: string, dataJson: string, opts: PublishOptions = {}): Promise<Message> {
    const stream = this.streamKey(ref);
    const keys = opts.idempotencyKey === undefined ? [stream, `${stream}/meta`] : [stream, `${stream}/meta`, `${stream}/idem/${opts.idempotencyKey}`];
    let reply: PublishReply;
    try {
      const { gen, adopt } = await this.vouched();
      await this.unconfirmed?.settle(stream);
      const { maxMessages, ttlS } = opts.retention ?? this.retention;
      const windowMs = this.idempotencyWindowS * 1000;
      reply = await this.cmd.relayPublish(keys.length, ...keys, maxMessages, userId, dataJson, ttlS, this.channelName(ref), newEpoch(), windowMs, gen, adopt ? '1' : '0');
      // Acknowledged means on the replica too (Sentinel, or the slot's replica on a Cluster), so a failover cannot take it back unannounced.
      const replicas = await waitForReplica(this.cmd, stream);
      if (replicas === 0) {
        if (this.unconfirmed) this.unconfirmed.mark(stream);
        else this.generation.unreplicated();
        this.warnUnreplicated();
      } else if (replicas !== undefined) {
        if (this.unconfirmed) this.unconfirmed.confirmed(stream);
        else this.generation.replicated();
      }
    } catch (err) {
      throw new RelayError('unavailable', 'message store unavailable', { cause: err });
    }
    const [id, duplicate, fields] = reply;
    // A known key: the first message, or (once trimmed away) its id with this request's fields.
    if (duplicate && fields) return toMessage(ref.channel, [id, fields]);
    return makeMessage(id, ref.channel, userId, dataJson);
  }

  async history(ref: ChannelRef, query: HistoryQuery): Promise<HistoryPage> {
    const { nowMs, stream, entries } = await this.read(ref, query.after ?? '', query.limit);
    const messages = entries.map((e) => toMessage(ref.channel, e));
    const page: HistoryPage = { messages: query.after === undefined ? messages.reverse() : messages, epoch: stream?.epoch ?? NO_EPOCH };
    if (query.after !== undefined) {
      const ttlMs = (query.ttlS ?? this.retention.ttlS) * 1000;
      page.recovery = judgeRecovery({ after: parseMessageId(query.after)!, clientEpoch: query.epoch, stream, nowMs, ttlMs });
    }
    return page;
  }

  async epoch(ref: ChannelRef): Promise<string> {
    return (await this.read(ref, '', 0)).stream?.epoch ?? NO_EPOCH;
  }

  async subscribe(ref: ChannelRef, listener: MessageListener): Promise<() => void> {
    const channel = this.channelName(ref);
    let topic = this.topics.get(channel);
    if (!topic) {
      // Left earlier in this tick: still subscribed, and it must stay so.
      this.leaving.delete(channel);
      topic = { ref, listeners: new Set(), subscribed: this.sub.subscribe(channel), last: undefined, parked: undefined };
      this.topics.set(channel, topic);
    }
    const t = topic;
    t.listeners.add(listener);
    const stop = () => {
      t.listeners.delete(listener);
      if (t.listeners.size > 0 || this.topics.get(channel) !== t) return;
      this.topics.delete(channel);
      if (this.leaving.size === 0) setImmediate(this.unsubscribeLeaving);
      this.leaving.add(channel);
    };
    try {
      await t.subscribed;
    } catch (err) {
      stop();
      throw new RelayError('unavailable', 'message bus unavailable', { cause: err });
    }
    return stop;
  }

  /**
   * Channels whose last local listener left in this tick, unsubscribed in one
   * command at its end: a tenant's disable closing 10,000 connections in 200
   * channels sent 200 UNSUBSCRIBEs, each a socket write, ~13% of realtime's
   * CPU for that disable (bench scale scenario, profiled).
   */
  private readonly leaving = new Set<string>();

  private readonly unsubscribeLeaving = (): void => {
    if (this.leaving.size === 0) return;
    const channels = [...this.leaving];
    this.leaving.clear();
    this.sub.unsubscribe(...channels).catch(() => {});
  };

  async ready(): Promise<boolean> {
    return this.sub.status === 'ready' && (await redisPing(this.cmd));
  }

  async close(): Promise<void> {
    this.stopWatch();
    this.generation.stop();
    this.unconfirmed?.close();
    this.topics.clear();
    this.sub.disconnect();
    this.cmd.disconnect();
  }

  private onMessage(channel: string, payload: string): void {
    const topic = this.topics.get(channel);
    if (!topic) return;
    const a = payload.indexOf('\n');
    const b = payload.indexOf('\n', a + 1);
    if (a < 0 || b < 0) return;
    const message = makeMessage(payload.slice(0, a), topic.ref.channel, payload.slice(a + 1, b), payload.slice(b + 1));
    if (topic.parked) topic.parked.push(message);
    else deliver(topic, message);
  }

  /**
   * After a lost connection, messages published meanwhile never came over
   * pub/sub: read them from the stream, then release what arrived live.
   */
  private async refill(channel: string, topic: Topic): Promise<void> {
    topic.parked ??= [];
    const resumeAfter = topic.resumeAfter;
    topic.resumeAfter = undefined;
    try {
      // The re-SUBSCRIBE must be acknowledged before reading, or a message
      // published between the read and the subscription would be lost.
      await this.sub.subscribe(channel);
      await this.connected();
      let after = resumeAfter ?? topic.last?.id;
      for (;;) {
        if (after === undefined) break;
        const { messages: page, recovery } = await this.history(topic.ref, { after, limit: REFILL_PAGE });
        if (recovery && !recovery.recovered) {
          this.logger.warn({ reason: recovery.reason, tenant_id: topic.ref.tenantId }, 'channel history lost while the message bus was disconnected');
        }
        for (const m of page) deliver(topic, m);
        if (page.length < REFILL_PAGE) break;
        after = page[page.length - 1]!.id;
      }
    } catch (err) {
      this.logger.warn({ err }, 'could not refill a channel after reconnecting; messages may be missing');
    } finally {
      const parked = topic.parked ?? [];
      topic.parked = undefined;
      for (const m of parked) deliver(topic, m);
    }
  }

  /** Cluster only (undefined elsewhere): channels with publishes no replica confirmed, announced after a failover. */
  private readonly unconfirmed: ClusterUnconfirmed | undefined;

  private lastUnreplicatedWarning = 0;

  private warnUnreplicated(): void {
    const now = Date.now();
    if (now - this.lastUnreplicatedWarning < 60_000) return;
    this.lastUnreplicatedWarning = now;
    this.logger.warn('message bus: no Redis replica acknowledged a publish; a failover now could lose it');
  }

  private async read(ref: ChannelRef, after: string, limit: number): Promise<ReadResult> {
    let reply: ReadReply;
    try {
      const { gen, adopt } = await this.vouched();
      const stream = this.streamKey(ref);
      await this.unconfirmed?.settle(stream);
      reply = await this.cmd.relayRead(stream, `${stream}/meta`, after, limit, gen, adopt ? '1' : '0', newEpoch());
      // ioredis may have learned of the failover while this read was out (and sent it on to the new master): read again after the new epoch.
      if (this.unconfirmed?.moved(stream)) {
        await this.unconfirmed.settle(stream);
        reply = await this.cmd.relayRead(stream, `${stream}/meta`, after, limit, gen, adopt ? '1' : '0', newEpoch());
      }
    } catch (err) {
      throw new RelayError('unavailable', 'message store unavailable', { cause: err });
    }
    const [exists, timeS, timeUs, epoch, since, maxDeleted, trimmedTo, entries] = reply;
    const nowMs = Number(timeS) * 1000 + Math.floor(Number(timeUs) / 1000);
    if (!exists) return { nowMs, stream: undefined, entries: [] };
    const stream: EpochState = {
      epoch: epoch ?? NO_EPOCH,
      since: parseMessageId(since ?? '0-0') ?? ZERO,
      maxDeleted: parseMessageId(maxDeleted ?? '0-0') ?? ZERO,
      trimmedTo: trimmedTo ? parseMessageId(trimmedTo) : undefined,
    };
    return { nowMs, stream, entries: entries ?? [] };
  }

  /** Commands fail fast while Redis is down; right after start they wait briefly for the first connect. */
  /** The tenant's streams, their meta and idempotency keys: all named `<prefix>ch:{<tenant>:…`. */
  async purgeTenant(tenantId: string): Promise<number> {
    await this.connected();
    return unlinkMatching(this.cmd, `${globLiteral(this.prefix)}ch:{${globLiteral(tenantId)}:*`);
  }

  private async connected(): Promise<void> {
    if (this.cmd.status !== 'ready') await redisReady(this.cmd, 2000);
  }

  /**
   * Connected, and the history generation checked on this connection: after
   * a Redis restart or failover no script runs before the check has decided
   * whether every channel's epoch changes.
   */
  private async vouched(): Promise<Generation> {
    await this.connected();
    return this.generation.get();
  }

  /**
   * The stream's name is the stem of the channel's meta and idempotency keys:
   * its hash tag `{tenant:channel}` puts them in one Redis Cluster slot, as the
   * scripts need. (Before Redis HA the name had no braces: a rolling upgrade
   * across that change starts a new stream, so a new epoch, and a client
   * resuming from the old stream is told `recovered: false`.)
   */
  private streamKey(ref: ChannelRef): string {
    return `${this.prefix}ch:{${ref.tenantId}:${ref.channel}}`;
  }

  private channelName(ref: ChannelRef): string {
    return `${this.prefix}msg:${ref.tenantId}:${ref.channel}`;
  }
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

function toMessage(channel: string, [id, fields]: StreamEntry): Message {
  let userId = '';
  let dataJson = 'null';
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] === 'u') userId = fields[i + 1]!;
    else if (fields[i] === 'd') dataJson = fields[i + 1]!;
  }
  return makeMessage(id, channel, userId, dataJson);
}
