/** Injectable time source, in milliseconds since the epoch. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock tests move by hand. */
export class ManualClock implements Clock {
  constructor(private ms: number = Date.now()) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
}

/**
 * Milliseconds on a clock that never jumps (performance.now(), offset to read
 * like Date.now() at process start). Leases are measured on it: a wall-clock
 * step back (NTP, a VM resumed) must not extend one (Chubby, etcd).
 */
export const monotonicClock: Clock = { now: () => performance.timeOrigin + performance.now() };
