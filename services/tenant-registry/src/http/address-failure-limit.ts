import { clockedLru, setUntil, systemClock, type Clock, type RateLimiter } from '@service-relay/core';

/** Addresses remembered as over their limit at once (each costs a few dozen bytes). */
const MAX_BLOCKED = 50_000;

/**
 * Host-sync failures per client address, across tenants
 * (HOST_FETCH_ADDRESS_RATE_LIMIT a minute). Once an address is over its
 * limit, every host-sync request from it is answered 429 before the database
 * is touched, until its window ends: made-up tenant ids or credentials cannot
 * turn into database reads at the rate they are sent.
 *
 * The count itself is the shared limiter's (Redis across replicas when there
 * is one); the "over the limit until" mark is kept in this process, so the
 * check before the database costs no round trip. A replica learns an address
 * is over at that address's next failure it sees.
 */
export class AddressFailureLimit {
  private readonly blocked: ReturnType<typeof clockedLru<string, number>>;

  constructor(
    private readonly limiter: RateLimiter,
    private readonly clock: Clock = systemClock,
  ) {
    this.blocked = clockedLru<string, number>(MAX_BLOCKED, clock);
  }

  /** Whole seconds until this address may try again; 0 when it is not over its limit. */
  retryAfterS(address: string): number {
    const until = this.blocked.get(address);
    if (until === undefined) return 0;
    return Math.max(1, Math.ceil((until - this.clock.now()) / 1000));
  }

  /** Counts a failure; returns the seconds to wait when that put the address over its limit, else 0. */
  async failed(address: string): Promise<number> {
    const decision = await this.limiter.hit(`host-fail-addr:${address}`);
    if (decision.allowed) return 0;
    setUntil(this.blocked, address, this.clock.now() + decision.retryAfterS * 1000, this.clock.now() + decision.retryAfterS * 1000);
    return decision.retryAfterS;
  }
}
