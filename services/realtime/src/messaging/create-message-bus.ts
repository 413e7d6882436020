import type { Clock, Logger, RedisSettings } from '@service-relay/core';
import { MemoryMessageBus, type RetentionOptions } from './memory-message-bus';
import type { MessageBus } from './message-bus';
import { RedisMessageBus, type RedisPubSub } from './redis-message-bus';

export interface MessageBusOptions {
  retention: RetentionOptions;
  /** The embedded store's journal directory (HISTORY_DIR). */
  historyDir: string;
  /** IDEMPOTENCY_WINDOW_S */
  idempotencyWindowS: number;
  /** REDIS_PUBSUB (Redis only). */
  pubsub?: RedisPubSub;
  logger: Logger;
  clock?: Clock;
  /** Called on each error a Redis connection of the store reports (counted in relay_realtime_redis_errors_total). */
  onRedisError?: (connection: 'commands' | 'subscriber') => void;
}

/** Redis when REDIS_URL is set, otherwise the in-process driver with its on-disk journal. */
export function createMessageBus(redis: RedisSettings, opts: MessageBusOptions): MessageBus {
  const { retention, logger, idempotencyWindowS } = opts;
  if (redis.url) return new RedisMessageBus({ url: redis.url, tls: redis.tls }, redis.prefix, retention, logger, idempotencyWindowS, opts.onRedisError, opts.pubsub);
  return new MemoryMessageBus(retention, { dir: opts.historyDir, idempotencyWindowS, ...(opts.clock && { clock: opts.clock }) });
}
