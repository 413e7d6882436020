import { ManualClock } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { FailureSampler } from './failure-sampler';

describe('FailureSampler', () => {
  it('writes at most perWindow a window and carries the count of the rest on the next one written', () => {
    const clock = new ManualClock(0);
    const s = new FailureSampler(3, 60_000, clock);
    expect([s.take(), s.take(), s.take()]).toEqual(Array(3).fill({ record: true, suppressed: 0 }));
    expect(s.take()).toEqual({ record: false, firstInWindow: true });
    for (let i = 0; i < 996; i++) expect(s.take()).toEqual({ record: false, firstInWindow: false });
    expect(s.pending).toBe(997);
    clock.advance(59_999);
    expect(s.take().record).toBe(false);
    clock.advance(1);
    expect(s.take()).toEqual({ record: true, suppressed: 998 });
    expect(s.take()).toEqual({ record: true, suppressed: 0 });
    expect(s.pending).toBe(0);
    s.take();
    expect(s.take()).toEqual({ record: false, firstInWindow: true });
  });

  it('with a limit of 0 writes nothing and counts everything', () => {
    const s = new FailureSampler(0, 60_000, new ManualClock(0));
    expect(s.take()).toEqual({ record: false, firstInWindow: true });
    expect(s.take()).toEqual({ record: false, firstInWindow: false });
    expect(s.pending).toBe(2);
  });
});
