import { ManualClock } from '@service-relay/core';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { describe, expect, it } from 'vitest';
import { VerificationCache } from './verification-cache';

const T0 = 1_700_000_000_000;
const identity = (tenantId: string, expiresAt = T0 / 1000 + 3600): VerifiedIdentity => ({ tenantId, userId: 'u', expiresAt, keySlot: 'primary', keyVersion: 1 });

describe('VerificationCache', () => {
  const make = (maxEntries = 10) => {
    const clock = new ManualClock(T0);
    return { clock, cache: new VerificationCache({ ttlMs: 30_000, maxEntries, clock }) };
  };

  it('serves an entry for the TTL, never past the token exp', () => {
    const { clock, cache } = make();
    cache.set('a', identity('t1'), cache.generation);
    cache.set('b', identity('t1', T0 / 1000 + 5), cache.generation);
    clock.advance(5000);
    expect(cache.get('a')).toBeDefined();
    expect(cache.get('b')).toBeUndefined();
    clock.advance(25_000);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.set('c', identity('t1', T0 / 1000), cache.generation)).toBe(false);
  });

  it("drops one tenant's entries, and refuses results that started before a drop", () => {
    const { cache } = make();
    const gen = cache.generation;
    cache.set('a', identity('t1'), gen);
    cache.set('b', identity('t2'), gen);
    cache.dropTenant('t1');
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBeDefined();
    // A verifier answer obtained before the event must not come back after it.
    expect(cache.set('a', identity('t1'), gen)).toBe(false);
    cache.clear();
    expect(cache.size).toBe(0);
  });

  it('evicts the least recently used entry beyond its bound', () => {
    const { cache } = make(2);
    cache.set('a', identity('t'), 0);
    cache.set('b', identity('t'), 0);
    cache.get('a');
    cache.set('c', identity('t'), 0);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBeDefined();
    expect(cache.size).toBe(2);
  });

  it('is off with a zero TTL', () => {
    const cache = new VerificationCache({ ttlMs: 0, maxEntries: 10, clock: new ManualClock(T0) });
    expect(cache.enabled).toBe(false);
    expect(cache.set('a', identity('t'), 0)).toBe(false);
  });
});
