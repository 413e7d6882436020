import { createRedis, parseRedisUrl, type Logger, type RedisSettings } from '@service-relay/core';
import { webhookStreamKey, type WebhookEventSink } from '@service-relay/webhook-events';
import type { Scheduler } from '../timers/scheduler';
import { MemoryPresenceStore } from './memory-presence-store';
import type { PresenceStore, PresenceWebhooks } from './presence-store';
import { RedisPresenceStore } from './redis-presence-store';

export interface PresenceStoreOptions {
  /** PRESENCE_TTL_MS. */
  ttlMs: number;
  scheduler: Scheduler;
  logger: Logger;
  /** Keys under REDIS_PREFIX + this (default none): occupancy and users' connections are presence stores of their own. */
  keyPrefix?: string;
  /** Its joins and leaves are these webhook events (#32): on Redis appended to the event stream, in this process handed to `sink`. */
  webhooks?: PresenceWebhooks & { sink: WebhookEventSink | undefined };
}

/** Webhook events need the stream beside the store's keys, which a Redis Cluster puts in another slot: none there. */
export function webhookEventsPossible(redis: Readonly<RedisSettings>): boolean {
  return redis.url === undefined || parseRedisUrl(redis.url).kind !== 'cluster';
}

/** Picks the driver by REDIS_URL: shared across instances on Redis, in this process otherwise. */
export function createPresenceStore(redis: Readonly<RedisSettings>, opts: PresenceStoreOptions): PresenceStore {
  const w = opts.webhooks;
  if (redis.url === undefined) return new MemoryPresenceStore(w?.sink ? { ...w, sink: w.sink, now: () => opts.scheduler.now() } : undefined);
  // Every connect and close runs a script here (the users' store: user_connected
  // and user_disconnected for every tenant). ioredis's auto-pipelining sends
  // the commands of one event-loop turn in one write instead of one socket
  // write each: a disable that closes 10,000 connections spent half its loop
  // on those writes; with it the last of them saw its 4401 after 1.16 s, not
  // 1.62 s (bench/README.md "Scale of one instance"). Each command keeps its
  // own reply, deadline and order.
  const client = createRedis({ url: redis.url, tls: redis.tls }, { connectionName: 'realtime-presence', enableAutoPipelining: true });
  const subscriber = createRedis({ url: redis.url, tls: redis.tls }, { connectionName: 'realtime-presence-sub', enableOfflineQueue: true, maxRetriesPerRequest: null });
  // Failures are handled per call (and logged once by the store); ioredis would log every reconnect attempt otherwise.
  client.on('error', () => {});
  subscriber.on('error', () => {});
  const store = new RedisPresenceStore({
    redis: client,
    subscriber,
    prefix: redis.prefix + (opts.keyPrefix ?? ''),
    ttlMs: opts.ttlMs,
    scheduler: opts.scheduler,
    logger: opts.logger,
    ...(w && { webhooks: { ...w, stream: webhookStreamKey(redis.prefix) } }),
  });
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
