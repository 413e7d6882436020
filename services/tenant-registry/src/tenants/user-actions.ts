import type { CommittedChangeEvent } from './tenant';
import type { Logger } from '@service-relay/core';
import type { UserActionsStore } from '../store/user-actions-store';
import type { Propagation, PropagationResult } from './propagation';

export interface UserActionOutcome {
  userId: string;
  /** The revocation moment in force (the latest asked for); only for revoke_tokens. */
  before?: number;
  propagation: PropagationResult;
}

/**
 * A host's user-level actions (#13), committed as tenant feed changes and
 * answered under the admin rule: confirmed only when every consumer applied
 * them (realtime closed what they close, verifiers and gateways dropped
 * what they cached) or provably stopped trusting its caches.
 */
export class UserActions {
  constructor(
    private readonly store: UserActionsStore,
    private readonly propagation: Propagation,
    private readonly logger: Logger,
    private readonly onPropagated: (confirmed: boolean, seconds: number) => void = () => {},
  ) {}

  /** Undefined when the tenant does not exist. */
  async revokeTokens(tenantId: string, userId: string, before: number): Promise<UserActionOutcome | undefined> {
    const change = await this.store.revoke(tenantId, userId, before);
    if (!change) return undefined;
    this.logger.info({ tenant_id: tenantId, user_id: change.revocation.userId, before: change.revocation.before, seq: change.event.seq }, 'user tokens revoked');
    return { userId: change.revocation.userId, before: change.revocation.before, propagation: await this.awaitInForce(tenantId, change.event) };
  }

  /** Undefined when the tenant does not exist. */
  async disconnect(tenantId: string, userId: string): Promise<UserActionOutcome | undefined> {
    const event = await this.store.disconnect(tenantId, userId);
    if (!event) return undefined;
    this.logger.info({ tenant_id: tenantId, user_id: userId.toLowerCase(), seq: event.seq }, 'user disconnected');
    return { userId: userId.toLowerCase(), propagation: await this.awaitInForce(tenantId, event) };
  }

  private async awaitInForce(tenantId: string, event: CommittedChangeEvent): Promise<PropagationResult> {
    const seq = event.seq;
    const result = await this.propagation.awaitInForce(tenantId, event);
    this.onPropagated(result.confirmed, result.waitedMs / 1000);
    if (!result.confirmed) this.logger.warn({ tenant_id: tenantId, seq, waited_ms: result.waitedMs, pending: result.pending.map((p) => p.consumerId) }, 'user change committed but not confirmed in force everywhere; consumers keep pulling it');
    return result;
  }
}
