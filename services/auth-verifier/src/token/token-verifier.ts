import { isRelayError, type Clock, type Logger } from '@service-relay/core';
import type { KeySource } from '../keys/key-source';
import type { TenantKeys } from './tenant-keys';
import { TokenChecker, type CheckResult, type ParsedToken } from './token-checker';

/** A verdict, or: the verifier could not decide (callers fail closed with 503). */
export type VerifyOutcome = CheckResult | { valid: false; unavailable: true };

export interface VerificationObserver {
  verified(outcome: VerifyOutcome, startedAt: number): void;
}

export interface TokenVerifierOptions {
  keySource: KeySource;
  clock: Clock;
  maxLifetimeS: number;
  logger: Logger;
  observer?: VerificationObserver;
}

const UNAVAILABLE: VerifyOutcome = Object.freeze({ valid: false, unavailable: true });

/**
 * The token rules plus key lookup. Answers synchronously when the keys are in
 * the in-process cache (the common case), so the transport can reply without
 * a promise hop; otherwise a promise.
 */
export class TokenVerifier {
  private readonly checker: TokenChecker;

  constructor(private readonly opts: TokenVerifierOptions) {
    this.checker = new TokenChecker({ clock: opts.clock, maxLifetimeS: opts.maxLifetimeS });
  }

  /**
   * `minSeq`: the caller applied a change of the token's tenant at that
   * tenant-feed position; the verdict must reflect it (0: any trusted state).
   * Every valid verdict carries the position it reflects (`asOfSeq`).
   */
  verify(token: string, minSeq = 0): VerifyOutcome | Promise<VerifyOutcome> {
    const startedAt = performance.now();
    const parsed = this.checker.parse(token);
    if (!parsed.ok) return this.done({ valid: false, reason: parsed.reason }, startedAt);
    const source = this.opts.keySource;
    const keys = minSeq > source.appliedSeq() ? undefined : source.peek(parsed.tenantId);
    if (keys) return this.done(this.stamp(this.checker.checkKeys(parsed, keys), keys), startedAt);
    return this.fetchAndCheck(parsed, minSeq).then((outcome) => this.done(outcome, startedAt));
  }

  /**
   * The verdict verify() gives, by the same rules on the same key material,
   * for an operator's explanation: not counted in the verification metrics
   * (an explanation is not a client's check).
   */
  async explain(token: string): Promise<VerifyOutcome> {
    const parsed = this.checker.parse(token);
    if (!parsed.ok) return { valid: false, reason: parsed.reason };
    const keys = this.opts.keySource.peek(parsed.tenantId);
    if (keys) return this.stamp(this.checker.checkKeys(parsed, keys), keys);
    return this.fetchAndCheck(parsed, 0);
  }

  private fetchAndCheck(parsed: ParsedToken, minSeq: number): Promise<VerifyOutcome> {
    return this.opts.keySource.get(parsed.tenantId, minSeq).then(
      (k: TenantKeys) => this.stamp(this.recheck(parsed, k), k),
      (err: unknown) => {
        if (!isRelayError(err) || err.code !== 'unavailable') this.opts.logger.error({ err, tenant_id: parsed.tenantId }, 'key lookup failed');
        return UNAVAILABLE;
      },
    );
  }

  /**
   * Time moved while the keys were fetched (up to the fetch deadline), so the
   * expiry rule is applied again against the clock of the verdict.
   */
  private recheck(parsed: ParsedToken, keys: TenantKeys): CheckResult {
    if (parsed.exp * 1000 <= this.opts.clock.now()) return { valid: false, reason: 'expired' };
    return this.checker.checkKeys(parsed, keys);
  }

  /**
   * The position a verdict reflects: the cached layers hold only what every
   * applied change left valid (a change drops its tenant before it counts as
   * applied), and a registry answer reflects its own snapshot; a fetched
   * answer older than a change applied here was refused by the version floor.
   */
  private stamp(result: CheckResult, keys: TenantKeys): CheckResult {
    if (result.valid) result.identity.asOfSeq = Math.max(this.opts.keySource.appliedSeq(), keys.asOfSeq ?? 0);
    return result;
  }

  private done(outcome: VerifyOutcome, startedAt: number): VerifyOutcome {
    this.opts.observer?.verified(outcome, startedAt);
    return outcome;
  }
}
