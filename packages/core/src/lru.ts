import { LRUCache } from 'lru-cache';
import type { Clock } from './clock';

type LruOptions<K extends NonNullable<unknown>, V extends NonNullable<unknown>> = Omit<LRUCache.Options<K, V, unknown>, 'max' | 'perf' | 'ttlResolution'>;

/**
 * A bounded `lru-cache` that reads time from our Clock, so tests move a
 * ManualClock instead of sleeping. `ttlResolution: 0` makes every staleness
 * check read the clock (no "now" cached for a millisecond).
 */
export function clockedLru<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(max: number, clock: Clock, options: LruOptions<K, V> = {}): LRUCache<K, V> {
  if (!(max >= 1)) throw new Error('an LRU needs room for at least one entry');
  return new LRUCache<K, V>({ ...options, max, perf: clock, ttlResolution: 0 });
}

/**
 * Stores `value` until `expiresAt` (clock ms): from that instant on it is not
 * served. lru-cache counts an entry stale once `now - start > ttl`, one
 * millisecond later than that, hence the start one millisecond early.
 * Returns false (and stores nothing) when `expiresAt` is not in the future.
 * lru-cache reads a start of 0 as "no TTL", so the clock must be past 1 ms
 * (every real and test clock is).
 */
export function setUntil<K extends NonNullable<unknown>, V extends NonNullable<unknown>>(cache: LRUCache<K, V>, key: K, value: V, expiresAt: number): boolean {
  const now = cache.perf.now();
  const ttl = Math.ceil(expiresAt - now);
  if (ttl <= 0) {
    cache.delete(key);
    return false;
  }
  cache.set(key, value, { ttl, start: now - 1 });
  return true;
}
