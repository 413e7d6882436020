import { createRedis, isCluster, RelayError, redisPing, redisReady, waitForReplica, type Logger, type Redis, type RedisTarget } from '@service-relay/core';
import { ClusterUnconfirmed } from './cluster-unconfirmed';
import { makeMessage, type ChannelRef, type Message, type MessageListener } from './message';
import type { HistoryPage, HistoryQuery, MessageBus, PublishOptions } from './message-bus';
import type { RetentionOptions } from './memory-message-bus';
import { parseMessageId } from './message-id';
import { HistoryGeneration, type Generation } from './redis-history-generation';
import { PUBLISH_SCRIPT, READ_SCRIPT } from './redis-scripts';
import { globLiteral, unlinkMatching } from '../purge/redis-scan';
import { judgeRecovery, newEpoch, NO_EPOCH, type EpochState } from './recovery';
import { RedisLiveTopics, type LivePath } from './redis-live';

/**
 * REDIS_PUBSUB: `auto` is sharded pub/sub on a Cluster and plain elsewhere;
 * `plain` is PUBLISH/SUBSCRIBE everywhere (what versions before it did);
 * `both` (Cluster) publishes and listens on both names, for a rolling
 * upgrade from such a version (docs/OPERATIONS.md "Sharded pub/sub on a Cluster").
 */
export type RedisPubSub = 'auto' | 'plain' | 'both';

type StreamEntry = [id: string, fields: string[]];

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

const ZERO = Object.freeze({ ms: 0, seq: 0 });

/**
 * Redis Streams keep ids and history; pub/sub carries live delivery
 * (redis-live.ts: one subscriber client per process, sharded on a Cluster).
 */
export class RedisMessageBus implements MessageBus {
  private readonly cmd: Redis & Scripts;
  private readonly live: RedisLiveTopics;
  private readonly generation: HistoryGeneration;

  constructor(
    url: RedisTarget,
    private readonly prefix: string,
    private readonly retention: RetentionOptions,
    private readonly logger: Logger,
    private readonly idempotencyWindowS = 600,
    onRedisError: (connection: 'commands' | 'subscriber') => void = () => {},
    pubsub: RedisPubSub = 'auto',
  ) {
    // Auto-pipelined (ioredis sends a turn's commands in one write): the publishes of one socket read
    // reach Redis, and come back to subscribers, together, in fuller batch frames (bench/README.md "Redis's groups").
    this.cmd = createRedis(url, { connectionName: 'realtime-messages', enableAutoPipelining: true }) as Redis & Scripts;
    // Without numberOfKeys the key count is the first argument: the idempotency key is optional.
    this.cmd.defineCommand('relayPublish', { lua: PUBLISH_SCRIPT });
    this.cmd.defineCommand('relayRead', { numberOfKeys: 2, lua: READ_SCRIPT });
    this.cmd.on('error', () => onRedisError('commands'));
    this.generation = new HistoryGeneration(this.cmd, `${prefix}{history}:generation`, logger);
    const cluster = isCluster(this.cmd);
    this.unconfirmed = cluster ? new ClusterUnconfirmed(this.cmd, logger) : undefined;
    const path: LivePath = !cluster || pubsub === 'plain' ? 'plain' : pubsub === 'both' ? 'both' : 'sharded';
    const history = { readAfter: (ref: ChannelRef, after: string, limit: number) => this.history(ref, { after, limit }), connected: () => this.connected() };
    this.live = new RedisLiveTopics(url, prefix, path, history, logger, () => onRedisError('subscriber'));
  }

  /** How live messages travel: `plain` (PUBLISH), `sharded` (SPUBLISH, Cluster) or `both`. */
  get livePath(): LivePath {
    return this.live.path;
  }

  async publish(ref: ChannelRef, userId: string, dataJson: string, opts: PublishOptions = {}): Promise<Message> {
    const stream = this.streamKey(ref);
    const keys = opts.idempotencyKey === undefined ? [stream, `${stream}/meta`] : [stream, `${stream}/meta`, `${stream}/idem/${opts.idempotencyKey}`];
    let reply: PublishReply;
    try {
      const { gen, adopt } = await this.vouched();
      await this.spublishable();
      await this.unconfirmed?.settle(stream);
      const { maxMessages, ttlS } = opts.retention ?? this.retention;
      const windowMs = this.idempotencyWindowS * 1000;
      const live = this.live.names(ref);
      reply = await this.cmd.relayPublish(keys.length, ...keys, maxMessages, userId, dataJson, ttlS, live.plain ?? '', newEpoch(), windowMs, gen, adopt ? '1' : '0', live.sharded ?? '');
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
    const { subscribed, stop } = this.live.subscribe(ref, listener);
    try {
      await subscribed;
    } catch (err) {
      stop();
      throw new RelayError('unavailable', 'message bus unavailable', { cause: err });
    }
    return stop;
  }

  async ready(): Promise<boolean> {
    if (!this.live.ready() || !(await redisPing(this.cmd))) return false;
    return this.spublishable().then(
      () => true,
      () => false,
    );
  }

  private spublishChecked: Promise<void> | undefined;

  /**
   * Sharded pub/sub needs Redis 7 on the Cluster's nodes. Checked once
   * before the first publish (a script failing at SPUBLISH would have
   * stored the message already): on Redis 6 every publish answers
   * unavailable, /readyz fails and the log says what to set.
   */
  private spublishable(): Promise<void> {
    if (this.live.path === 'plain') return Promise.resolve();
    this.spublishChecked ??= (this.cmd.call('COMMAND', 'INFO', 'SPUBLISH') as Promise<unknown[]>).then(
      (info) => {
        if (Array.isArray(info) && info[0]) return;
        this.logger.error('message bus: the Redis Cluster has no SPUBLISH (Redis before 7.0): set REDIS_PUBSUB=plain, or upgrade Redis');
        throw new Error('SPUBLISH unknown to Redis');
      },
      (err: unknown) => {
        // Redis unreachable: ask again next time.
        this.spublishChecked = undefined;
        throw err;
      },
    );
    return this.spublishChecked;
  }

  async close(): Promise<void> {
    this.generation.stop();
    this.unconfirmed?.close();
    this.live.close();
    this.cmd.disconnect();
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
