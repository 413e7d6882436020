import { createRedis, type Clock, type Logger, type RedisSettings } from '@service-relay/core';
import { MemoryTenantPublishRate, RedisTenantPublishRate, type TenantPublishRate } from './tenant-publish-rate';

/** Picks the driver by REDIS_URL: reconciled across instances on Redis, exact in this process otherwise. */
export function createTenantPublishRate(redis: Readonly<RedisSettings>, opts: { clock: Clock; logger: Logger; syncMs: number; onSync: (ok: boolean) => void }): TenantPublishRate {
  if (redis.url === undefined) return new MemoryTenantPublishRate(opts.clock);
  const client = createRedis({ url: redis.url, tls: redis.tls }, { connectionName: 'realtime-tenant-publishes' });
  // Failures are handled per sync (this instance decides alone meanwhile).
  client.on('error', () => {});
  const rate = new RedisTenantPublishRate({ redis: client, prefix: redis.prefix, clock: opts.clock, logger: opts.logger, syncMs: opts.syncMs, onSync: opts.onSync });
  return {
    take: (tenantId, limit, n) => rate.take(tenantId, limit, n),
    forget: (tenantId) => rate.forget(tenantId),
    async close() {
      await rate.close();
      await client.quit().catch(() => client.disconnect());
    },
  };
}
