import type { Logger } from '@service-relay/core';
import { CLOSE_TRY_AGAIN_LATER } from './close-codes';
import type { ConnectionRegistry } from './connection-registry';

export interface FeedCutoffOptions {
  /** TenantFeed.isCurrent: every change committed as of a request sent less than the lease ago is applied. */
  isCurrent: () => boolean;
  registry: ConnectionRegistry;
  logger: Logger;
  /** How often idle connections are looked at; delivery and frames check for themselves. Default 100 ms. */
  checkIntervalMs?: number;
}

/** The close reason of a connection this instance can no longer vouch for. */
export const CUT_OFF_REASON = 'tenant feed lost: reconnect';

/**
 * A realtime instance whose tenant feed is not current cannot prove that any
 * of its connections is still valid: the registry stops waiting for a
 * consumer silent past its lease, so a revocation may have answered 200
 * without this instance (docs/ARCHITECTURE.md "Tenant feed", "Cut off").
 * Then it delivers nothing to and accepts nothing from its connections, and
 * closes every one with 1013 (try again later: the client reconnects, through
 * the load balancer, to an instance that is current; /readyz says not ready
 * meanwhile).
 *
 * `serving()` is that check. The delivery paths call it themselves, once per
 * message and topic (not per socket) on the fan-out, before each replayed
 * page and on each client frame, so nothing slips through between the lease
 * running out and the timer below noticing: the timer only closes connections
 * that have nothing to send or receive meanwhile.
 */
export class FeedCutoff {
  private cut = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: FeedCutoffOptions) {}

  /** True while the feed is current; otherwise closes every connection (1013) and answers false. */
  readonly serving = (): boolean => {
    if (this.opts.isCurrent()) {
      if (this.cut) {
        this.cut = false;
        this.opts.logger.info('tenant feed current again: taking connections');
      }
      return true;
    }
    if (!this.cut) {
      this.cut = true;
      this.opts.logger.warn('tenant feed not current: closing every connection (1013) and taking none until it is');
    }
    if (this.opts.registry.size > 0) this.closeAll();
    return false;
  };

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(this.serving, this.opts.checkIntervalMs ?? 100);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private closeAll(): void {
    const conns = this.opts.registry.all();
    for (const c of conns) c.close(CLOSE_TRY_AGAIN_LATER, CUT_OFF_REASON);
    this.opts.logger.warn({ closed: conns.length }, 'closed connections this instance cannot vouch for');
  }
}
