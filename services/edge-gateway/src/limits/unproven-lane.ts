import pLimit, { type LimitFunction } from 'p-limit';

export interface UnprovenLaneOptions {
  /** Verifier or registry calls for unproven credentials at once. */
  maxInFlight: number;
  /** How many more may wait for a turn; past that a request is shed. */
  maxQueued: number;
}

/** What `admit` rejects with when the lane is full: the caller sheds the request (503, never auth_unavailable). */
export class LaneFullError extends Error {
  constructor() {
    super('the unproven lane is full');
    this.name = 'LaneFullError';
  }
}

/**
 * The bounded way to the verifier and the registry for credentials nothing
 * vouches for yet: a token of a tenant no valid token was verified for at this
 * gateway recently, a host credential the registry has not accepted recently.
 * Such a credential is what a flood of forged ones looks like, and each costs
 * a verifier call, often a registry lookup. Bounded here, a burst of them (the
 * first refusals of many addresses at once, before their budgets run out)
 * waits its turn instead of queueing in front of the verifier and registry,
 * where tenants already served would wait behind it (measured in
 * tests/faults/overload.test.ts; docs/OPERATIONS.md "Overload"). Credentials
 * of served tenants never take this lane.
 */
export class UnprovenLane {
  private readonly limit: LimitFunction;
  private shedTotal = 0;

  constructor(private readonly opts: UnprovenLaneOptions) {
    if (!(opts.maxInFlight >= 1) || !(opts.maxQueued >= 0)) throw new Error('UnprovenLane: maxInFlight must be at least 1, maxQueued at least 0');
    this.limit = pLimit(opts.maxInFlight);
  }

  /** Runs `fn` in its turn, or rejects with LaneFullError at once when `maxQueued` already wait. */
  admit<T>(fn: () => Promise<T>): Promise<T> {
    // p-limit starts queued work a microtask later, so the two counts are taken together.
    if (this.limit.activeCount + this.limit.pendingCount >= this.opts.maxInFlight + this.opts.maxQueued) {
      this.shedTotal++;
      return Promise.reject(new LaneFullError());
    }
    return this.limit(fn);
  }

  /** Calls running and waiting now, and requests shed since start (for metrics). */
  get current(): { active: number; queued: number; shed: number } {
    return { active: this.limit.activeCount, queued: this.limit.pendingCount, shed: this.shedTotal };
  }
}
