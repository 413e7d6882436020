import { ManualClock, systemClock, type Clock } from '@service-relay/core';

/** A clock that can also run something at a point in time (token expiry). */
export interface Scheduler extends Clock {
  /** Runs `fn` once `now() >= atMs`; the returned function cancels it. */
  at(atMs: number, fn: () => void): () => void;
}

// setTimeout takes at most a signed 32-bit delay; longer waits re-arm.
const MAX_DELAY_MS = 2_147_483_647;

/** Real timers over any clock (the system clock by default). */
export function timerScheduler(clock: Clock = systemClock): Scheduler {
  return {
    now: () => clock.now(),
    at(atMs, fn) {
      let timer: NodeJS.Timeout | undefined;
      const arm = () => {
        const delay = atMs - clock.now();
        if (delay <= 0) {
          timer = undefined;
          fn();
          return;
        }
        timer = setTimeout(arm, Math.min(delay, MAX_DELAY_MS));
        timer.unref();
      };
      arm();
      return () => {
        if (timer) clearTimeout(timer);
        timer = undefined;
      };
    },
  };
}

export function isScheduler(clock: Clock): clock is Scheduler {
  return typeof (clock as Partial<Scheduler>).at === 'function';
}

/** Tests move time by hand; due callbacks run inside advance()/set(), in time order. */
export class ManualScheduler extends ManualClock implements Scheduler {
  private readonly due = new Set<{ atMs: number; fn: () => void }>();

  at(atMs: number, fn: () => void): () => void {
    const entry = { atMs, fn };
    if (atMs <= this.now()) {
      // Same as a zero-delay timer: never inside the caller's own stack.
      let cancelled = false;
      queueMicrotask(() => {
        if (!cancelled) fn();
      });
      return () => {
        cancelled = true;
      };
    }
    this.due.add(entry);
    return () => this.due.delete(entry);
  }

  override advance(ms: number): void {
    super.advance(ms);
    this.fire();
  }

  override set(ms: number): void {
    super.set(ms);
    this.fire();
  }

  private fire(): void {
    const now = this.now();
    const ready = [...this.due].filter((e) => e.atMs <= now).sort((x, y) => x.atMs - y.atMs);
    for (const e of ready) {
      this.due.delete(e);
      e.fn();
    }
  }
}
