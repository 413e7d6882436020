import { afterEach, describe, expect, it, vi } from 'vitest';
import { STEPS_PER_INTERVAL, startPingSweep, type Pingable } from './ping-sweep';

class Peer implements Pingable {
  pingedAt = 0;
  pings: number[] = [];
  dropped: number | undefined;
  constructor(
    private readonly now: () => number,
    private readonly answers = true,
  ) {}
  sendPing(): void {
    this.pings.push(this.now());
    if (this.answers) this.pingedAt = 0;
  }
  dropSilent(): void {
    this.dropped = this.now();
  }
}

const INTERVAL = 3000;
const STEP = INTERVAL / STEPS_PER_INTERVAL;

describe('startPingSweep', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('pings every connection once per interval, spread evenly over it', () => {
    vi.useFakeTimers();
    const now = () => Date.now();
    const peers = new Set(Array.from({ length: 1000 }, () => new Peer(now)));
    const start = now();
    const stop = startPingSweep(peers, INTERVAL);
    const perStep: number[] = [];
    let before = 0;
    for (let s = 0; s < STEPS_PER_INTERVAL; s++) {
      vi.advanceTimersByTime(STEP);
      const total = [...peers].reduce((n, p) => n + p.pings.length, 0);
      perStep.push(total - before);
      before = total;
    }
    // One interval: each peer once, no step more than its share (1000 / 300, rounded up).
    expect([...peers].every((p) => p.pings.length === 1)).toBe(true);
    expect(Math.max(...perStep)).toBe(Math.ceil(1000 / STEPS_PER_INTERVAL));
    vi.advanceTimersByTime(INTERVAL);
    // The next interval pings each peer again, one interval after the first.
    for (const p of peers) expect(p.pings[1]! - p.pings[0]!).toBe(INTERVAL);
    expect(Math.min(...[...peers].map((p) => p.pings[0]!))).toBe(start + STEP);
    stop();
  });

  it('drops a peer that leaves its ping unanswered until its next turn, and only that one', () => {
    vi.useFakeTimers();
    const now = () => Date.now();
    const silent = new Peer(now, false);
    const peers = new Set([new Peer(now), silent, new Peer(now)]);
    const stop = startPingSweep(peers, INTERVAL);
    vi.advanceTimersByTime(INTERVAL);
    expect(silent.pings).toHaveLength(1);
    expect(silent.dropped).toBeUndefined();
    vi.advanceTimersByTime(INTERVAL);
    expect(silent.dropped).toBe(silent.pings[0]! + INTERVAL);
    expect([...peers].filter((p) => p.dropped !== undefined)).toEqual([silent]);
    stop();
  });

  it('judges a ping only once it is half an interval old, even when its next turn comes sooner', () => {
    vi.useFakeTimers();
    const now = () => Date.now();
    const others = Array.from({ length: 599 }, () => new Peer(now));
    const silent = new Peer(now, false);
    const peers = new Set([...others, silent]);
    const stop = startPingSweep(peers, INTERVAL);
    vi.advanceTimersByTime(INTERVAL);
    // Pinged in the interval's last step; then every peer before it closes, so it comes first next time.
    expect(silent.pings).toEqual([expect.any(Number)]);
    const pingedAt = silent.pings[0]!;
    for (const p of others) peers.delete(p);
    vi.advanceTimersByTime(INTERVAL / 2 - STEP);
    expect(silent.dropped).toBeUndefined();
    vi.advanceTimersByTime(INTERVAL);
    expect(silent.dropped).toBeGreaterThanOrEqual(pingedAt + INTERVAL / 2);
    stop();
  });

  it('visits no closed connection and pings no more after stop', () => {
    vi.useFakeTimers();
    const now = () => Date.now();
    const peers = new Set(Array.from({ length: 900 }, () => new Peer(now)));
    const stop = startPingSweep(peers, INTERVAL);
    vi.advanceTimersByTime(INTERVAL / 2);
    const late = [...peers].slice(-10);
    for (const p of late) peers.delete(p);
    vi.advanceTimersByTime(INTERVAL / 2);
    expect(late.every((p) => p.pings.length === 0)).toBe(true);
    const total = () => [...peers].reduce((n, p) => n + p.pings.length, 0);
    const before = total();
    stop();
    vi.advanceTimersByTime(10 * INTERVAL);
    expect(total()).toBe(before);
  });
});
