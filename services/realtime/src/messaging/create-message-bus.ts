import type { Clock, Logger, RedisSettings } from '@service-relay/core';
import { MemoryMessageBus, type RetentionOptions } from './memory-message-bus';
import type { MessageBus } from './message-bus';
import { RedisMessageBus } from './redis-message-bus';

/** Redis when REDIS_URL is set, otherwise the in-process driver. */
export function createMessageBus(redis: RedisSettings, retention: RetentionOptions, logger: Logger, clock?: Clock): MessageBus {
  return redis.url ? new RedisMessageBus(redis.url, redis.prefix, retention, logger) : new MemoryMessageBus(retention, clock);
}
