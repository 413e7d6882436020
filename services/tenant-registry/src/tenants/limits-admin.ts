import type { Logger } from '@service-relay/core';
import type { PartialLimits } from '@service-relay/tenant-events';
import type { LimitsStore, Plan, SetTenantLimits, TenantLimitsRecord } from '../store/limits-store';
import type { Propagation, PropagationResult } from './propagation';

export interface LimitsOutcome {
  record: TenantLimitsRecord;
  propagation: PropagationResult;
}

export interface PlanOutcome {
  plan: Plan;
  created: boolean;
  propagation: PropagationResult;
}

/**
 * Plans and per-tenant limits (#30) under the admin guarantee: the store
 * commits the change with its `limits` feed records, then the call waits
 * until every consumer applied them (a plan change: the last of its tenants'
 * changes, which consumers apply in order after the others).
 */
export class LimitsAdmin {
  constructor(
    private readonly store: LimitsStore,
    private readonly propagation: Propagation,
    private readonly logger: Logger,
    private readonly onPropagated: (confirmed: boolean, seconds: number) => void = () => {},
  ) {}

  get(tenantId: string): Promise<TenantLimitsRecord | undefined> {
    return this.store.get(tenantId);
  }

  async set(tenantId: string, input: SetTenantLimits): Promise<LimitsOutcome | 'unknown_plan' | undefined> {
    const out = await this.store.set(tenantId, input);
    if (out === undefined || out === 'unknown_plan') return out;
    this.logger.info({ tenant_id: tenantId, plan: out.record.plan, limits_version: out.record.version, seq: out.change.event.seq }, 'tenant limits changed');
    return { record: out.record, propagation: await this.awaitInForce([out.change]) };
  }

  listPlans(): Promise<Plan[]> {
    return this.store.listPlans();
  }

  getPlan(name: string): Promise<Plan | undefined> {
    return this.store.getPlan(name);
  }

  async putPlan(name: string, limits: PartialLimits): Promise<PlanOutcome> {
    const out = await this.store.putPlan(name, limits);
    this.logger.info({ plan: name, version: out.plan.version, created: out.created, tenants: out.changes.length }, 'plan changed');
    return { plan: out.plan, created: out.created, propagation: await this.awaitInForce(out.changes) };
  }

  deletePlan(name: string): ReturnType<LimitsStore['deletePlan']> {
    return this.store.deletePlan(name);
  }

  private async awaitInForce(changes: Parameters<Propagation['awaitAllInForce']>[0]): Promise<PropagationResult> {
    const result = await this.propagation.awaitAllInForce(changes);
    if (changes.length > 0) this.onPropagated(result.confirmed, result.waitedMs / 1000);
    if (!result.confirmed) this.logger.warn({ changes: changes.length, waited_ms: result.waitedMs, pending: result.pending.map((p) => p.consumerId) }, 'limits change committed but not confirmed in force everywhere; consumers keep pulling it');
    return result;
  }
}
