import { createRedis, type Logger, type RedisSettings } from '@service-relay/core';
import type { Scheduler } from '../timers/scheduler';
import { MemoryTenantConnections } from './memory-tenant-connections';
import { RedisTenantConnections } from './redis-tenant-connections';
import type { TenantConnections } from './tenant-connections';

export interface TenantConnectionsOptions {
  limit: number;
  scheduler: Scheduler;
  logger: Logger;
}

/** Picks the driver by REDIS_URL: shared across instances on Redis, in this process otherwise. */
export function createTenantConnections(redis: Readonly<RedisSettings>, opts: TenantConnectionsOptions): TenantConnections {
  if (redis.url === undefined) return new MemoryTenantConnections(opts.limit);
  const client = createRedis({ url: redis.url, tls: redis.tls }, { connectionName: 'realtime-tenant-connections' });
  // Failures are handled per call (the per-instance fallback); ioredis would log every reconnect attempt otherwise.
  client.on('error', () => {});
  const counter = new RedisTenantConnections({ redis: client, prefix: redis.prefix, limit: opts.limit, scheduler: opts.scheduler, logger: opts.logger });
  return {
    limit: counter.limit,
    acquire: (tenantId, limit) => counter.acquire(tenantId, limit),
    forget: (tenantId) => counter.forget(tenantId),
    async close() {
      await counter.close();
      await client.quit().catch(() => client.disconnect());
    },
  };
}
