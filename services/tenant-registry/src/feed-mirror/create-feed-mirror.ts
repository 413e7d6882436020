import type { Logger, RedisTls } from '@service-relay/core';
import type { FeedMirror } from './feed-mirror';
import { RedisFeedMirror } from './redis-feed-mirror';

/**
 * The mirror lives in Redis: with REDIS_URL unset (one process, embedded
 * PostgreSQL) there is none, and none is needed, since the database cannot
 * fail apart from the process that embeds it.
 */
export function createFeedMirror(redis: { url?: string | undefined; prefix: string; tls?: RedisTls | undefined }, logger: Logger): FeedMirror | undefined {
  return redis.url === undefined ? undefined : new RedisFeedMirror({ url: redis.url, tls: redis.tls }, redis.prefix, logger);
}
