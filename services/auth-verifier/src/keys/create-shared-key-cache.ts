import type { Keyring, Logger, RedisSettings } from '@service-relay/core';
import { KeyCipher } from './key-cipher';
import { RedisKeyCache } from './redis-key-cache';
import type { SharedKeyCache } from './shared-key-cache';

export interface SharedKeyCacheOptions {
  /** The cache's sealing keys (config.cacheKeys, derived from SECRETS_KEYS / SECRETS_KEY); required with Redis. */
  cacheKeys: Keyring | undefined;
  /** How long an entry is served (KEY_CACHE_TTL_S). */
  ttlMs: number;
  logger: Logger;
}

/**
 * Picks the driver by REDIS_URL: in Redis, shared by every verifier replica.
 * Without it there is one verifier and nothing to share: the key source's
 * own LRU is the only layer (MemoryKeyCache is the contract in one process,
 * for the key source's tests).
 */
export function createSharedKeyCache(redis: Readonly<RedisSettings>, opts: SharedKeyCacheOptions): SharedKeyCache | undefined {
  if (!redis.url) return undefined;
  if (!opts.cacheKeys) throw new Error('the shared key cache needs SECRETS_KEY or SECRETS_KEYS');
  return new RedisKeyCache({
    url: { url: redis.url, tls: redis.tls },
    prefix: redis.prefix,
    cipher: new KeyCipher(opts.cacheKeys),
    // A raised floor must outlive any fetch in flight and any entry written before it.
    floorTtlMs: Math.max(10 * opts.ttlMs, 600_000),
    logger: opts.logger,
  });
}
