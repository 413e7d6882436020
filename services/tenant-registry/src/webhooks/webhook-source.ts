import { createRedis, type Logger, type RedisSettings } from '@service-relay/core';
import { recordOfFields, webhookStreamKey, type InProcessWebhookEvents, type WebhookEventRecord } from '@service-relay/webhook-events';

export interface SourcedEvent {
  /** The stream entry id (the position after it is what the sender records). */
  id: string;
  /** Undefined for an entry that is not an event (skipped, its position still moves). */
  record: WebhookEventRecord | undefined;
}

/**
 * Where the sender reads realtime's events, in order. `read` starts after
 * `after` (the position stored with the last batch); `trim` drops what is
 * stored in the database now.
 */
export interface WebhookEventSource {
  read(after: string | undefined, max: number, waitMs: number): Promise<SourcedEvent[]>;
  /** Everything up to and including `upTo` is stored elsewhere now. */
  trim(upTo: string): Promise<void>;
  /** Events read but not stored (the transaction failed): read them again next time. */
  unread(events: readonly SourcedEvent[]): void;
  close(): void;
}

/** Picks the driver: the Redis stream realtime's scripts append to, or the embedded default's in-process hand-over. */
export function createWebhookEventSource(redis: Readonly<RedisSettings>, inProcess: InProcessWebhookEvents | undefined, logger: Logger): WebhookEventSource {
  if (redis.url === undefined) return inProcessSource(inProcess);
  // A blocking XREAD holds its connection: one of its own.
  const client = createRedis({ url: redis.url, tls: redis.tls }, { connectionName: 'registry-webhook-events', maxRetriesPerRequest: null });
  client.on('error', (err: Error) => logger.debug({ err: err.message }, 'webhook events redis error'));
  const key = webhookStreamKey(redis.prefix);
  return {
    async read(after, max, waitMs) {
      const reply = (await client.xread('COUNT', max, 'BLOCK', Math.max(1, waitMs), 'STREAMS', key, after ?? '0-0')) as Array<[string, Array<[string, string[]]>]> | null;
      const entries = reply?.[0]?.[1] ?? [];
      return entries.map(([id, fields]) => ({ id, record: recordOfFields(fields) }));
    },
    async trim(upTo) {
      const [ms, seq] = upTo.split('-');
      await client.xtrim(key, 'MINID', `${ms}-${Number(seq) + 1}`);
    },
    unread() {
      // The position was not moved: the next read starts before them again.
    },
    close: () => client.disconnect(),
  };
}

function inProcessSource(queue: InProcessWebhookEvents | undefined): WebhookEventSource {
  let next = 0;
  return {
    async read(_after, max, waitMs) {
      if (!queue) {
        await new Promise((r) => setTimeout(r, waitMs));
        return [];
      }
      return (await queue.take(max, waitMs)).map((record) => ({ id: `0-${next++}`, record }));
    },
    async trim() {},
    unread(events) {
      queue?.giveBack(events.flatMap((e) => (e.record ? [e.record] : [])));
    },
    close() {},
  };
}
