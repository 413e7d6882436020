import { hash } from 'node:crypto';
import { RelayError, isRelayError, type Logger } from '@service-relay/core';
import type { TenantFeedView } from '@service-relay/tenant-events';
import { isFresh, verifyFresh, type VerifierClient, type VerifyResult } from '@service-relay/verifier-client';
import type { VerificationCache } from './verification-cache';

/** Where the authenticator reports what it did (metrics); every hook is optional. */
export interface AuthObserver {
  cacheHit?(): void;
  cacheMiss?(): void;
  verified?(seconds: number, outcome: 'valid' | 'invalid' | 'unavailable'): void;
}

export interface AuthenticatorOptions {
  verifier: VerifierClient;
  cache: VerificationCache;
  feed: TenantFeedView;
  logger: Logger;
  observer?: AuthObserver;
  /**
   * Wraps each verifier call (a cache hit never reaches it): the gateway lets
   * calls for tenants it has not served recently wait their turn
   * (limits/unproven-lane.ts). A rejection is passed on to the caller as is.
   */
  gate?: (token: string, call: () => Promise<VerifyResult>) => Promise<VerifyResult>;
}

/**
 * Judges a bearer token: from the cache when that is provably fresh, else by
 * asking the verifier. Negative answers are never cached, so a token that
 * becomes valid (a tenant enabled again) works on its next request and the
 * cache cannot be filled by garbage tokens.
 */
export class Authenticator {
  private readonly unsubscribe: Array<() => void> = [];
  /** Checks in flight by token hash, so a burst of one token costs one verifier call. */
  private readonly inFlight = new Map<string, { generation: number; result: Promise<VerifyResult> }>();

  constructor(private readonly opts: AuthenticatorOptions) {
    const { feed, cache, logger } = opts;
    // The feed reports a change applied only after this handler ran, so the
    // admin call that made it returns after the tenant's entries are gone.
    this.unsubscribe.push(feed.subscribe((e) => cache.dropTenant(e.tenant_id)));
    this.unsubscribe.push(
      feed.onReset(() => {
        logger.warn('tenant feed reset: dropping every cached verification');
        cache.clear();
      }),
    );
  }

  /**
   * The verdict: at once when the cache proves it, else a promise that
   * rejects with RelayError('auth_unavailable') when nobody can decide. A
   * cache hit is the common case on the gateway's every request; a promise
   * there, its microtask and the awaiting handler's resumption were a
   * measurable share of what auth costs (bench/README.md "An earlier Intel Xeon table").
   */
  check(token: string): VerifyResult | Promise<VerifyResult> {
    const { cache, feed, observer } = this.opts;
    // One-shot hash: about half the cost of createHash().update().digest() per request.
    const key = hash('sha256', token, 'base64');
    // While the feed is not current a change may not have reached us, so the cache proves nothing.
    const trusted = cache.enabled && feed.isCurrent();
    if (trusted) {
      const identity = cache.get(key);
      if (identity) {
        observer?.cacheHit?.();
        return { valid: true, identity };
      }
      observer?.cacheMiss?.();
    }
    const generation = cache.generation;
    // Join a check of the same token only if no tenant event came since it
    // started: a request after a revocation must get a fresh answer.
    const running = this.inFlight.get(key);
    if (running && running.generation === generation) return running.result;
    const { gate } = this.opts;
    const result = gate ? gate(token, () => this.verify(token, key, generation, trusted)) : this.verify(token, key, generation, trusted);
    this.inFlight.set(key, { generation, result });
    const forget = () => {
      if (this.inFlight.get(key)?.result === result) this.inFlight.delete(key);
    };
    result.then(forget, forget);
    return result;
  }

  private async verify(token: string, key: string, generation: number, trusted: boolean): Promise<VerifyResult> {
    const { cache, feed, verifier, observer } = this.opts;
    const started = performance.now();
    let result: VerifyResult;
    try {
      // A verdict judged before a change of its tenant that this gateway has
      // applied is asked for again (ARCHITECTURE.md "Verdict freshness").
      result = await verifyFresh(verifier, feed, token);
    } catch (err) {
      observer?.verified?.((performance.now() - started) / 1000, 'unavailable');
      if (isRelayError(err) && err.code === 'auth_unavailable') throw err;
      throw new RelayError('auth_unavailable', 'verifier call failed', { cause: err });
    }
    observer?.verified?.((performance.now() - started) / 1000, result.valid ? 'valid' : 'invalid');
    // Stored only if no tenant event arrived while the call was in flight
    // (the generation check), the feed is still current and the verdict
    // reflects every change of its tenant applied here.
    if (result.valid && trusted && feed.isCurrent() && isFresh(result.identity, feed)) cache.set(key, result.identity, generation);
    return result;
  }

  close(): void {
    for (const u of this.unsubscribe.splice(0)) u();
  }
}
