import { createRedis, redisPing, redisReady, watchClusterSubscriber, withTimeout, type Logger, type Redis, type RedisTarget } from '@service-relay/core';
import type { NoticeHandler, TenantEventBus } from './tenant-event-bus';

/** A notice that Redis does not take within this is reported as not sent; the feed's polling covers it. */
const NOTIFY_DEADLINE_MS = 250;

/**
 * Redis pub/sub on `{prefix}tenant-feed`. A subscriber connection that was
 * lost and is back tells its handlers to check now (notices may have been
 * missed meanwhile).
 */
export class RedisTenantEventBus implements TenantEventBus {
  private readonly pub: Redis;
  private readonly sub: Redis;
  private readonly channel: string;
  private readonly handlers = new Set<NoticeHandler>();
  private subscribed: Promise<unknown> | undefined;

  constructor(
    url: RedisTarget,
    prefix: string,
    private readonly logger: Logger,
  ) {
    this.channel = `${prefix}tenant-feed`;
    this.pub = createRedis(url, { connectionName: `${prefix}events-pub` });
    this.sub = createRedis(url, { connectionName: `${prefix}events-sub`, enableOfflineQueue: true, maxRetriesPerRequest: null });
    this.pub.on('error', () => {});
    this.sub.on('error', (err: Error) => this.logger.debug({ err: err.message }, 'tenant event bus connection error'));
    let connectedBefore = false;
    this.sub.on('ready', () => {
      if (connectedBefore) this.emit(undefined);
      connectedBefore = true;
    });
    this.sub.on('message', (channel: string, message: string) => {
      if (channel !== this.channel) return;
      const seq = Number(message);
      this.emit(Number.isSafeInteger(seq) && seq >= 0 ? seq : undefined);
    });
    // On a Redis Cluster the subscription can move to another node without a 'ready' here: the same "check now".
    this.stopWatch = watchClusterSubscriber(this.sub, { lost: () => {}, moved: () => this.emit(undefined) });
  }

  private readonly stopWatch: () => void;

  async notify(seq: number): Promise<void> {
    await withTimeout(this.pub.publish(this.channel, String(seq)), NOTIFY_DEADLINE_MS);
  }

  onNotice(handler: NoticeHandler): () => void {
    this.handlers.add(handler);
    this.subscribed ??= this.sub.subscribe(this.channel).catch((err: unknown) => {
      this.subscribed = undefined;
      this.logger.warn({ err: (err as Error).message }, 'could not subscribe to tenant feed notices');
    });
    return () => this.handlers.delete(handler);
  }

  isConnected(): boolean {
    return this.sub.status === 'ready';
  }

  async ready(): Promise<boolean> {
    if (this.subscribed) await withTimeout(this.subscribed, 2000).catch(() => {});
    // Both connections open on their own; a bus created a moment ago is
    // still connecting, which is not the same as being down.
    await redisReady(this.pub, 2000).catch(() => {});
    return this.isConnected() && (await withTimeout(redisPing(this.pub), 1000).catch(() => false));
  }

  async close(): Promise<void> {
    this.stopWatch();
    this.handlers.clear();
    this.sub.disconnect();
    this.pub.disconnect();
  }

  private emit(seq: number | undefined): void {
    for (const h of this.handlers) {
      try {
        h(seq);
      } catch (err) {
        this.logger.error({ err }, 'tenant feed notice handler failed');
      }
    }
  }
}
