import { ManualClock } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { TokenBucket } from './token-bucket';

describe('TokenBucket', () => {
  it('allows a burst, then refuses with the time until the next token', () => {
    const clock = new ManualClock(1_000_000);
    const bucket = new TokenBucket(10, 3, clock);
    expect([bucket.take(), bucket.take(), bucket.take()]).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    expect(bucket.take()).toEqual({ ok: false, retryAfterMs: 100 });
    clock.advance(40);
    expect(bucket.take()).toEqual({ ok: false, retryAfterMs: 60 });
    clock.advance(60);
    expect(bucket.take()).toEqual({ ok: true });
    expect(bucket.take().ok).toBe(false);
  });

  it('refills at the rate and never above the burst', () => {
    const clock = new ManualClock(0);
    const bucket = new TokenBucket(2, 5, clock);
    for (let i = 0; i < 5; i++) expect(bucket.take().ok).toBe(true);
    clock.advance(60_000);
    let taken = 0;
    for (let i = 0; i < 20 && bucket.take().ok; i++) taken++;
    expect(taken).toBe(5);
    clock.advance(1000);
    expect([bucket.take().ok, bucket.take().ok, bucket.take().ok]).toEqual([true, true, false]);
  });

  it('a clock stepping back refills nothing', () => {
    const clock = new ManualClock(10_000);
    const bucket = new TokenBucket(1, 1, clock);
    expect(bucket.take().ok).toBe(true);
    clock.set(5_000);
    expect(bucket.take()).toEqual({ ok: false, retryAfterMs: 1000 });
    clock.set(6_000);
    expect(bucket.take().ok).toBe(true);
  });
});
