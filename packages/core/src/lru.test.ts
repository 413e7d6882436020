import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock';
import { clockedLru, setUntil } from './lru';

describe('clockedLru / setUntil', () => {
  it('serves an entry until, not including, its expiry instant on the injected clock', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const cache = clockedLru<string, string>(10, clock);
    expect(setUntil(cache, 'a', 'x', clock.now() + 1000)).toBe(true);
    clock.advance(999);
    expect(cache.get('a')).toBe('x');
    clock.advance(1);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('stores nothing already expired, and drops what the key held', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const cache = clockedLru<string, string>(10, clock);
    setUntil(cache, 'a', 'x', clock.now() + 1);
    expect(setUntil(cache, 'a', 'y', clock.now())).toBe(false);
    expect(cache.has('a')).toBe(false);
  });

  it('evicts the least recently used entry at its bound', () => {
    const clock = new ManualClock(1_700_000_000_000);
    const cache = clockedLru<string, number>(2, clock);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.get('a');
    cache.set('c', 3);
    expect([...cache.keys()].sort()).toEqual(['a', 'c']);
  });

  it('refuses a bound below one', () => {
    expect(() => clockedLru(0, new ManualClock())).toThrow();
  });
});
