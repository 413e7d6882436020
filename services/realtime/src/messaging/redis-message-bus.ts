import { createRedis, RelayError, redisPing, redisReady, type Logger, type Redis } from '@service-relay/core';
import { isAfter, makeMessage, type ChannelRef, type Message, type MessageListener } from './message';
import type { HistoryQuery, MessageBus } from './message-bus';
import type { RetentionOptions } from './memory-message-bus';

// One atomic step per publish: the id is assigned, the entry trimmed and the
// channel's idle clock reset, and the message published, with no other
// publish in between. So pub/sub delivery order equals id order everywhere.
const PUBLISH_SCRIPT = `
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'u', ARGV[2], 'd', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('PUBLISH', ARGV[5], id .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[3])
return id
`;

type StreamEntry = [id: string, fields: string[]];

interface Topic {
  ref: ChannelRef;
  listeners: Set<MessageListener>;
  subscribed: Promise<unknown>;
  /** Last message delivered; later copies of it or older ones are dropped. */
  last: Message | undefined;
  /** While refilling after a reconnect, live messages wait here. */
  parked: Message[] | undefined;
}

interface PublishCommand {
  relayPublish(stream: string, maxLen: number, userId: string, dataJson: string, ttlS: number, channel: string): Promise<string>;
}

const REFILL_PAGE = 500;

/**
 * Redis Streams keep ids and history; pub/sub carries live delivery. One
 * subscriber connection per process: a channel is SUBSCRIBEd when its first
 * local listener arrives and UNSUBSCRIBEd when the last one leaves.
 */
export class RedisMessageBus implements MessageBus {
  private readonly cmd: Redis & PublishCommand;
  private readonly sub: Redis;
  private readonly topics = new Map<string, Topic>();
  private wasReady = false;
  private lostSinceReady = false;

  constructor(
    url: string,
    private readonly prefix: string,
    private readonly retention: RetentionOptions,
    private readonly logger: Logger,
  ) {
    this.cmd = createRedis(url, { connectionName: 'realtime-messages' }) as Redis & PublishCommand;
    this.cmd.defineCommand('relayPublish', { numberOfKeys: 1, lua: PUBLISH_SCRIPT });
    this.cmd.on('error', () => {});
    this.sub = createRedis(url, { connectionName: 'realtime-messages-sub', enableOfflineQueue: true, maxRetriesPerRequest: null });
    this.sub.on('error', (err: Error) => this.logger.debug({ err: err.message }, 'message bus connection error'));
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
  }

  async publish(ref: ChannelRef, userId: string, dataJson: string): Promise<Message> {
    try {
      await this.connected();
      const id = await this.cmd.relayPublish(this.streamKey(ref), this.retention.maxMessages, userId, dataJson, this.retention.ttlS, this.channelName(ref));
      return makeMessage(id, ref.channel, userId, dataJson);
    } catch (err) {
      throw new RelayError('unavailable', 'message store unavailable', { cause: err });
    }
  }

  async history(ref: ChannelRef, query: HistoryQuery): Promise<Message[]> {
    try {
      await this.connected();
      const key = this.streamKey(ref);
      if (query.after !== undefined) {
        const entries = (await this.cmd.xrange(key, `(${query.after}`, '+', 'COUNT', query.limit)) as StreamEntry[];
        return entries.map((e) => toMessage(ref.channel, e));
      }
      const entries = (await this.cmd.xrevrange(key, '+', '-', 'COUNT', query.limit)) as StreamEntry[];
      return entries.reverse().map((e) => toMessage(ref.channel, e));
    } catch (err) {
      throw new RelayError('unavailable', 'message store unavailable', { cause: err });
    }
  }

  async subscribe(ref: ChannelRef, listener: MessageListener): Promise<() => void> {
    const channel = this.channelName(ref);
    let topic = this.topics.get(channel);
    if (!topic) {
      topic = { ref, listeners: new Set(), subscribed: this.sub.subscribe(channel), last: undefined, parked: undefined };
      this.topics.set(channel, topic);
    }
    const t = topic;
    t.listeners.add(listener);
    const stop = () => {
      t.listeners.delete(listener);
      if (t.listeners.size > 0 || this.topics.get(channel) !== t) return;
      this.topics.delete(channel);
      this.sub.unsubscribe(channel).catch(() => {});
    };
    try {
      await t.subscribed;
    } catch (err) {
      stop();
      throw new RelayError('unavailable', 'message bus unavailable', { cause: err });
    }
    return stop;
  }

  async ready(): Promise<boolean> {
    return this.sub.status === 'ready' && (await redisPing(this.cmd));
  }

  async close(): Promise<void> {
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
    topic.parked = [];
    try {
      // The re-SUBSCRIBE must be acknowledged before reading, or a message
      // published between the read and the subscription would be lost.
      await this.sub.subscribe(channel);
      await this.connected();
      let after = topic.last?.id;
      for (;;) {
        const page = after === undefined ? [] : await this.history(topic.ref, { after, limit: REFILL_PAGE });
        for (const m of page) deliver(topic, m);
        if (page.length < REFILL_PAGE) break;
        after = page[page.length - 1]!.id;
      }
    } catch (err) {
      this.logger.warn({ err }, 'could not refill a channel after reconnecting; messages may be missing');
    } finally {
      const parked = topic.parked;
      topic.parked = undefined;
      for (const m of parked) deliver(topic, m);
    }
  }

  /** Commands fail fast while Redis is down; right after start they wait briefly for the first connect. */
  private async connected(): Promise<void> {
    if (this.cmd.status !== 'ready') await redisReady(this.cmd, 2000);
  }

  private streamKey(ref: ChannelRef): string {
    return `${this.prefix}ch:${ref.tenantId}:${ref.channel}`;
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
