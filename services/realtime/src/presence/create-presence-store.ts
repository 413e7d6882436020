import { createRedis, type Logger, type RedisSettings } from '@service-relay/core';
import type { Scheduler } from '../timers/scheduler';
import { MemoryPresenceStore } from './memory-presence-store';
import type { PresenceStore } from './presence-store';
import { RedisPresenceStore } from './redis-presence-store';

export interface PresenceStoreOptions {
  /** PRESENCE_TTL_MS. */
  ttlMs: number;
  scheduler: Scheduler;
  logger: Logger;
}

/** Picks the driver by REDIS_URL: shared across instances on Redis, in this process otherwise. */
export function createPresenceStore(redis: Readonly<RedisSettings>, opts: PresenceStoreOptions): PresenceStore {
  if (redis.url === undefined) return new MemoryPresenceStore();
  const client = createRedis(redis.url, { connectionName: 'realtime-presence' });
  const subscriber = createRedis(redis.url, { connectionName: 'realtime-presence-sub', enableOfflineQueue: true, maxRetriesPerRequest: null });
  // Failures are handled per call (and logged once by the store); ioredis would log every reconnect attempt otherwise.
  client.on('error', () => {});
  subscriber.on('error', () => {});
  const store = new RedisPresenceStore({ redis: client, subscriber, prefix: redis.prefix, ttlMs: opts.ttlMs, scheduler: opts.scheduler, logger: opts.logger });
  return {
    join: (ref, connId, userId, dataJson) => store.join(ref, connId, userId, dataJson),
    leave: (ref, connId) => store.leave(ref, connId),
    members: (ref) => store.members(ref),
    subscribe: (ref, listener) => store.subscribe(ref, listener),
    purgeTenant: (tenantId) => store.purgeTenant(tenantId),
    async close() {
      await store.close();
      subscriber.disconnect();
      await client.quit().catch(() => client.disconnect());
    },
  };
}
