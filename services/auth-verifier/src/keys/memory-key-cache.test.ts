import { ManualClock } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { MemoryKeyCache } from './memory-key-cache';
import { sharedKeyCacheContract } from './shared-key-cache.contract';

let clock = new ManualClock(1_700_000_000_000);

sharedKeyCacheContract('memory', {
  async make() {
    clock = new ManualClock(1_700_000_000_000);
    const one = new MemoryKeyCache({ clock });
    return { a: one, b: one };
  },
  async elapse(ms) {
    clock.advance(ms);
  },
});

describe('MemoryKeyCache', () => {
  it('holds at most maxEntries tenants, forgetting the least recently used', async () => {
    const cache = new MemoryKeyCache({ clock: new ManualClock(1_700_000_000_000), maxEntries: 2 });
    const data = (version: number) => ({ found: true, disabled: false, version });
    await cache.put('a', data(1), 30_000);
    await cache.put('b', data(1), 30_000);
    await cache.get('a');
    await cache.put('c', data(1), 30_000);
    expect(await cache.get('b')).toBeUndefined();
    expect((await cache.get('a'))?.data.version).toBe(1);
    expect((await cache.get('c'))?.data.version).toBe(1);
  });

  it('keeps a raised floor past the entries it outlived', async () => {
    const cache = new MemoryKeyCache({ clock: new ManualClock(1_700_000_000_000), maxEntries: 1 });
    await cache.drop('a', 5);
    await cache.put('b', { found: true, disabled: false, version: 1 }, 30_000);
    await cache.put('a', { found: true, disabled: false, version: 4 }, 30_000);
    expect(await cache.get('a')).toBeUndefined();
  });
});
