import type { Logger, RedisSettings } from '@service-relay/core';
import { MemoryTenantEventBus } from './memory-tenant-event-bus';
import { RedisTenantEventBus } from './redis-tenant-event-bus';
import type { TenantEventBus } from './tenant-event-bus';

/** Redis pub/sub when REDIS_URL is set, otherwise the in-process bus. */
export function createTenantEventBus(redis: RedisSettings, logger: Logger): TenantEventBus {
  return redis.url ? new RedisTenantEventBus({ url: redis.url, tls: redis.tls }, redis.prefix, logger) : new MemoryTenantEventBus();
}
