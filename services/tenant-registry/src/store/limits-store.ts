import { isCanonicalUuid, systemClock, type Clock } from '@service-relay/core';
import { canonicalLimits, mergeLimits, parseLimits, patchLimits, type LimitsPatch, type PartialLimits } from '@service-relay/tenant-events';
import type { Db, Queryable } from '../db/db';
import type { CommittedChangeEvent } from '../tenants/tenant';
import type { FeedStore } from './feed-store';

/** A tenant's limits as stored: version 0 while nothing was ever set (realtime's defaults apply). */
export interface TenantLimitsRecord {
  tenantId: string;
  plan: string | null;
  overrides: PartialLimits;
  /** The plan's document merged with the overrides: what the `limits` change carries. */
  limits: PartialLimits;
  version: number;
}

export interface TenantLimitsSnapshot extends TenantLimitsRecord {
  /** The feed sequence the answer reflects (read in the same statement). */
  asOfSeq: number;
}

export interface Plan {
  name: string;
  limits: PartialLimits;
  version: number;
  /** Tenants on the plan. */
  tenants: number;
  createdAt: Date;
  updatedAt: Date;
}

/** A committed change of one tenant's limits, with its feed record. */
export interface LimitsChange {
  tenantId: string;
  event: CommittedChangeEvent;
}

export type SetTenantLimits = { plan?: string | null } & ({ replace: true; overrides: PartialLimits } | { replace: false; overrides: LimitsPatch });

/**
 * Plans and per-tenant limits (migrations/009_tenant_limits.sql). Every
 * change that moves a tenant's effective limits records a `limits` feed
 * change for it in the same transaction, carrying `{ limits, limits_version,
 * plan }`; a plan change records one per tenant on the plan. Locks: the plan
 * row first, then tenant rows in id order (a tenant write locks the plan it
 * moves to before its own row), so the two never wait on each other in a circle.
 */
export class LimitsStore {
  constructor(
    private readonly db: Db,
    private readonly feed: FeedStore,
    private readonly clock: Clock = systemClock,
  ) {}

  async snapshot(tenantId: string): Promise<TenantLimitsSnapshot | undefined> {
    if (!isCanonicalUuid(tenantId)) return undefined;
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT l.plan, l.overrides, l.limits_version, p.limits AS plan_limits, (SELECT seq FROM feed_state WHERE id = 1) AS as_of_seq
         FROM tenants t LEFT JOIN tenant_limits l ON l.tenant_id = t.tenant_id LEFT JOIN plans p ON p.name = l.plan
        WHERE t.tenant_id = $1`,
      [tenantId],
    );
    const row = rows[0];
    if (!row) return undefined;
    return { ...record(tenantId, row), asOfSeq: Number(row.as_of_seq) };
  }

  async get(tenantId: string): Promise<TenantLimitsRecord | undefined> {
    const s = await this.snapshot(tenantId);
    if (!s) return undefined;
    const { asOfSeq: _, ...rest } = s;
    return rest;
  }

  /** Undefined: no such tenant; 'unknown_plan': the plan named does not exist. */
  set(tenantId: string, input: SetTenantLimits): Promise<{ record: TenantLimitsRecord; change: LimitsChange } | 'unknown_plan' | undefined> {
    if (!isCanonicalUuid(tenantId)) return Promise.resolve(undefined);
    return this.db.transaction(async (tx) => {
      let planLimits: PartialLimits | undefined;
      if (typeof input.plan === 'string') {
        const [p] = await tx.query<{ limits: unknown }>('SELECT limits FROM plans WHERE name = $1 FOR SHARE', [input.plan]);
        if (!p) return 'unknown_plan' as const;
        planLimits = stored(p.limits);
      }
      const [tenant] = await tx.query<{ version: string | number }>('SELECT version FROM tenants WHERE tenant_id = $1 FOR UPDATE', [tenantId]);
      if (!tenant) return undefined;
      const [held] = await tx.query<Record<string, unknown>>(
        'SELECT l.plan, l.overrides, l.limits_version, p.limits AS plan_limits FROM tenant_limits l LEFT JOIN plans p ON p.name = l.plan WHERE l.tenant_id = $1',
        [tenantId],
      );
      const before = held ? record(tenantId, held) : undefined;
      const plan = input.plan === undefined ? (before?.plan ?? null) : input.plan;
      if (input.plan === undefined && before?.plan) planLimits = stored(held!.plan_limits);
      const overrides = canonicalLimits(input.replace ? input.overrides : patchLimits(before?.overrides ?? {}, input.overrides));
      const version = (before?.version ?? 0) + 1;
      await tx.query(
        `INSERT INTO tenant_limits (tenant_id, plan, overrides, limits_version, updated_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (tenant_id) DO UPDATE SET plan = excluded.plan, overrides = excluded.overrides, limits_version = excluded.limits_version, updated_at = excluded.updated_at`,
        [tenantId, plan, JSON.stringify(overrides), version, this.now()],
      );
      const rec: TenantLimitsRecord = { tenantId, plan, overrides, limits: canonicalLimits(mergeLimits(planLimits ?? {}, overrides)), version };
      const change = await this.record(tx, tenantId, Number(tenant.version), rec);
      return { record: rec, change };
    });
  }

  async listPlans(): Promise<Plan[]> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT p.name, p.limits, p.version, p.created_at, p.updated_at, (SELECT count(*) FROM tenant_limits l WHERE l.plan = p.name) AS tenants
         FROM plans p ORDER BY p.name LIMIT 1000`,
    );
    return rows.map(planOf);
  }

  async getPlan(name: string): Promise<Plan | undefined> {
    const rows = await this.db.query<Record<string, unknown>>(
      `SELECT p.name, p.limits, p.version, p.created_at, p.updated_at, (SELECT count(*) FROM tenant_limits l WHERE l.plan = p.name) AS tenants
         FROM plans p WHERE p.name = $1`,
      [name],
    );
    return rows[0] && planOf(rows[0]);
  }

  /** Creates or replaces a plan; every tenant on it gets a `limits` change, in this transaction. */
  putPlan(name: string, limits: PartialLimits): Promise<{ plan: Plan; created: boolean; changes: LimitsChange[] }> {
    const doc = canonicalLimits(limits);
    return this.db.transaction(async (tx) => {
      const now = this.now();
      const [row] = await tx.query<Record<string, unknown>>(
        `INSERT INTO plans (name, limits, version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)
         ON CONFLICT (name) DO UPDATE SET limits = excluded.limits, version = plans.version + 1, updated_at = excluded.updated_at
         RETURNING name, limits, version, created_at, updated_at, (xmax = 0) AS created`,
        [name, JSON.stringify(doc), now],
      );
      const members = await tx.query<{ tenant_id: string }>('SELECT tenant_id FROM tenant_limits WHERE plan = $1 ORDER BY tenant_id', [name]);
      const changes: LimitsChange[] = [];
      for (const { tenant_id: tenantId } of members) {
        const [tenant] = await tx.query<{ version: string | number }>('SELECT version FROM tenants WHERE tenant_id = $1 FOR UPDATE', [tenantId]);
        // Under the tenant's lock: it may have left the plan meanwhile.
        const [l] = await tx.query<Record<string, unknown>>('SELECT plan, overrides, limits_version FROM tenant_limits WHERE tenant_id = $1', [tenantId]);
        if (!tenant || !l || l.plan !== name) continue;
        const overrides = stored(l.overrides);
        const version = Number(l.limits_version) + 1;
        await tx.query('UPDATE tenant_limits SET limits_version = $2, updated_at = $3 WHERE tenant_id = $1', [tenantId, version, now]);
        changes.push(await this.record(tx, tenantId, Number(tenant.version), { tenantId, plan: name, overrides, limits: canonicalLimits(mergeLimits(doc, overrides)), version }));
      }
      return { plan: planOf({ ...row!, tenants: changes.length }), created: Boolean(row!.created), changes };
    });
  }

  /** 'in_use' while a tenant is on it (move them first): a tenant's limits never change by a delete. */
  deletePlan(name: string): Promise<'deleted' | 'not_found' | { inUse: number }> {
    return this.db.transaction(async (tx) => {
      const [p] = await tx.query('SELECT name FROM plans WHERE name = $1 FOR UPDATE', [name]);
      if (!p) return 'not_found' as const;
      const [{ n }] = (await tx.query<{ n: string | number }>('SELECT count(*) AS n FROM tenant_limits WHERE plan = $1', [name])) as [{ n: string | number }];
      if (Number(n) > 0) return { inUse: Number(n) };
      await tx.query('DELETE FROM plans WHERE name = $1', [name]);
      return 'deleted' as const;
    });
  }

  private async record(tx: Queryable, tenantId: string, tenantVersion: number, rec: TenantLimitsRecord): Promise<LimitsChange> {
    const event = { kind: 'limits' as const, version: tenantVersion, revokedKeyVersions: [], detail: { limits: rec.limits, limits_version: rec.version, plan: rec.plan } };
    const seq = await this.feed.record(tx, tenantId, event);
    return { tenantId, event: { ...event, seq } };
  }

  private now(): string {
    return new Date(this.clock.now()).toISOString();
  }
}

function record(tenantId: string, row: Record<string, unknown>): TenantLimitsRecord {
  const overrides = row.overrides === null || row.overrides === undefined ? {} : stored(row.overrides);
  const planLimits = row.plan_limits === null || row.plan_limits === undefined ? {} : stored(row.plan_limits);
  const plan = typeof row.plan === 'string' ? row.plan : null;
  const version = row.limits_version === null || row.limits_version === undefined ? 0 : Number(row.limits_version);
  return { tenantId, plan, overrides, limits: canonicalLimits(mergeLimits(planLimits, overrides)), version };
}

function planOf(row: Record<string, unknown>): Plan {
  return {
    name: String(row.name),
    limits: stored(row.limits),
    version: Number(row.version),
    tenants: Number(row.tenants ?? 0),
    createdAt: new Date(row.created_at as string),
    updatedAt: new Date(row.updated_at as string),
  };
}

/** A stored document was validated when written; one that no longer parses is a fault, not a silent default. */
function stored(value: unknown): PartialLimits {
  const parsed = parseLimits(typeof value === 'string' ? JSON.parse(value) : value);
  if (typeof parsed === 'string') throw new Error(`stored limits do not parse: ${parsed}`);
  return parsed;
}
