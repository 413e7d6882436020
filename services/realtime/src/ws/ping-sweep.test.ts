import { afterEach, describe, expect, it, vi } from 'vitest';
import { PING_SLICE, startPingSweep } from './ping-sweep';

describe('startPingSweep', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('pings every connection once per interval, a slice per turn of the event loop', async () => {
    vi.useFakeTimers();
    const pinged: number[] = [];
    const connections = Array.from({ length: 2 * PING_SLICE + 10 }, (_, i) => ({ ping: () => pinged.push(i) }));
    const stop = startPingSweep(connections, 1000);
    vi.advanceTimersByTime(1000);
    // The first slice runs in the timer's turn; the rest wait for later turns.
    expect(pinged).toHaveLength(PING_SLICE);
    await vi.runOnlyPendingTimersAsync();
    await vi.runOnlyPendingTimersAsync();
    expect(new Set(pinged).size).toBe(connections.length);
    stop();
  });

  it('stops between slices and pings no more after stop', () => {
    vi.useFakeTimers();
    let pings = 0;
    const connections = Array.from({ length: 3 * PING_SLICE }, () => ({ ping: () => void pings++ }));
    const stop = startPingSweep(connections, 1000);
    vi.advanceTimersByTime(1000);
    expect(pings).toBe(PING_SLICE);
    stop();
    vi.advanceTimersByTime(10_000);
    expect(pings).toBe(PING_SLICE);
  });
});
