import type { Logger } from '@service-relay/core';
import type { ChannelRules } from '@service-relay/channels';
import type { TenantChannelRules } from '../store/channel-rules-store';
import type { DeleteOptions, TenantDeletion } from '../store/tenant-deletion';
import type { TenantStore } from '../store/tenant-store';
import type { Propagation, PropagationResult } from './propagation';
import type { CommittedChangeEvent, ListPosition, Tenant, TenantChange, TenantPage } from './tenant';
import type { TenantFilter, TenantMetaInput } from './tenant-meta';
import type { TenantAction } from './tenant-rules';

export type { TenantAction };

/** A committed change and whether it is in force everywhere (absent when no consumer is concerned). */
export type AdminOutcome = TenantChange & { propagation?: PropagationResult };

/** A committed deletion and whether it is in force everywhere. */
export interface DeletionOutcome {
  deletion: TenantDeletion;
  propagation: PropagationResult;
}

/** A committed channel rules change and whether it is in force everywhere. */
export interface ChannelRulesOutcome {
  rules: TenantChannelRules;
  propagation: PropagationResult;
}

/**
 * Admin operations: the store commits the change together with its tenant
 * feed record, then the call waits until every consumer has applied it (or
 * provably stopped trusting its caches). An answer that cannot confirm that
 * within the bound says so (the change stays committed and keeps
 * propagating: consumers pull it from the feed).
 */
export class TenantAdmin {
  constructor(
    private readonly store: TenantStore,
    private readonly propagation: Propagation,
    private readonly logger: Logger,
    private readonly onPropagated: (confirmed: boolean, seconds: number) => void = () => {},
  ) {}

  async create(meta: TenantMetaInput = {}): Promise<AdminOutcome & { hostSyncSecret: string }> {
    const change = await this.store.create(meta);
    this.logger.info({ tenant_id: change.tenant.tenantId, seq: change.event?.seq }, 'tenant created');
    return { ...change, propagation: await this.propagate(change) };
  }

  get(tenantId: string): Promise<Tenant | undefined> {
    return this.store.get(tenantId);
  }

  list(limit: number, after?: ListPosition, filter?: TenantFilter): Promise<TenantPage> {
    return this.store.list(limit, after, filter);
  }

  /** Name and labels: in force at once (no consumer reads them), so no propagation. */
  async updateMeta(tenantId: string, meta: TenantMetaInput): Promise<Tenant | 'too_many_labels' | undefined> {
    const updated = await this.store.updateMeta(tenantId, meta);
    if (updated && updated !== 'too_many_labels') this.logger.info({ tenant_id: tenantId, name_set: meta.name !== undefined, labels_changed: Object.keys(meta.labels ?? {}).length }, 'tenant name or labels changed');
    return updated;
  }

  /** Undefined when the tenant does not exist. */
  async apply(tenantId: string, action: TenantAction): Promise<AdminOutcome | undefined> {
    const change = await this.run(tenantId, action);
    if (!change) return undefined;
    if (change.event || change.hostSyncSecret) this.logger.info({ tenant_id: tenantId, action, version: change.tenant.version, seq: change.event?.seq }, 'tenant changed');
    const propagation = await this.propagate(change);
    return propagation ? { ...change, propagation } : change;
  }

  /** The tenant's channel rules (the default at version 0 when never set); undefined when the tenant does not exist. */
  channelRules(tenantId: string): Promise<TenantChannelRules | undefined> {
    return this.store.channelRules.get(tenantId);
  }

  /** Sets the tenant's channel rules (`null`: back to the default) and waits until every consumer applied them. */
  async setChannelRules(tenantId: string, rules: ChannelRules | null): Promise<ChannelRulesOutcome | undefined> {
    const change = await this.store.channelRules.set(tenantId, rules);
    if (!change) return undefined;
    this.logger.info({ tenant_id: tenantId, rules_version: change.rules.version, rules: change.rules.rules.channels.length, reset: rules === null, seq: change.event.seq }, 'channel rules changed');
    return { rules: change.rules, propagation: await this.awaitInForce(tenantId, change.event) };
  }

  /**
   * Deletes the tenant for good and waits until every consumer applied the
   * `deleted` change (connections closed, tokens refused, caches dropped,
   * realtime's data purged). Undefined when no tenant, live or deleted, has the id.
   */
  async delete(tenantId: string, opts: DeleteOptions = {}): Promise<DeletionOutcome | undefined> {
    const deletion = await this.store.delete(tenantId, opts);
    if (!deletion) return undefined;
    this.logger.info({ tenant_id: tenantId, seq: deletion.event.seq, repeated: deletion.repeated, purged: deletion.purged, kept: deletion.kept }, 'tenant deleted');
    return { deletion, propagation: await this.awaitInForce(tenantId, deletion.event) };
  }

  private run(tenantId: string, action: TenantAction): Promise<TenantChange | undefined> {
    switch (action) {
      case 'disable':
        return this.store.setDisabled(tenantId, true);
      case 'enable':
        return this.store.setDisabled(tenantId, false);
      case 'rotate':
        return this.store.rotate(tenantId);
      case 'expire_previous':
        return this.store.expirePrevious(tenantId);
      case 'revoke_all':
        return this.store.revokeAll(tenantId);
      case 'rotate_host_sync':
        return this.store.rotateHostSync(tenantId);
      case 'rotate_host_sync_keep_previous':
        return this.store.rotateHostSync(tenantId, true);
      case 'expire_previous_host_sync':
        return this.store.expirePreviousHostSync(tenantId);
    }
  }

  private async propagate(change: TenantChange): Promise<PropagationResult | undefined> {
    return change.event && this.awaitInForce(change.tenant.tenantId, change.event);
  }

  private async awaitInForce(tenantId: string, e: CommittedChangeEvent): Promise<PropagationResult> {
    const result = await this.propagation.awaitInForce(tenantId, e);
    this.onPropagated(result.confirmed, result.waitedMs / 1000);
    const fields = { tenant_id: tenantId, kind: e.kind, seq: e.seq, waited_ms: result.waitedMs };
    if (result.confirmed) this.logger.debug(fields, 'tenant change in force everywhere');
    else this.logger.warn({ ...fields, pending: result.pending.map((p) => p.consumerId) }, 'tenant change committed but not confirmed in force everywhere; consumers keep pulling it');
    return result;
  }
}
