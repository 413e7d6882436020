import type { Clock, Logger, RedisSettings } from '@service-relay/core';
import { MemoryMessageBus, type RetentionOptions } from './memory-message-bus';
import type { MessageBus } from './message-bus';
import { RedisMessageBus } from './redis-message-bus';

export interface MessageBusOptions {
  retention: RetentionOptions;
  /** The embedded store's journal directory (HISTORY_DIR). */
  historyDir: string;
  /** IDEMPOTENCY_WINDOW_S */
  idempotencyWindowS: number;
  logger: Logger;
  clock?: Clock;
}

/** Redis when REDIS_URL is set, otherwise the in-process driver with its on-disk journal. */
export function createMessageBus(redis: RedisSettings, opts: MessageBusOptions): MessageBus {
  const { retention, logger, idempotencyWindowS } = opts;
  if (redis.url) return new RedisMessageBus(redis.url, redis.prefix, retention, logger, idempotencyWindowS);
  return new MemoryMessageBus(retention, { dir: opts.historyDir, idempotencyWindowS, ...(opts.clock && { clock: opts.clock }) });
}
