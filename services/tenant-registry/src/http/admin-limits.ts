import type { Request, Response, Router } from 'express';
import { errorBody, RelayError, type ErrorCode } from '@service-relay/core';
import { parseLimits, PLAN_NAME, type LimitsPatch, type PartialLimits } from '@service-relay/tenant-events';
import { jsonBody, tenantIdParam } from './admin-params';
import type { Plan, SetTenantLimits, TenantLimitsRecord } from '../store/limits-store';
import type { LimitsAdmin } from '../tenants/limits-admin';
import type { PropagationResult } from '../tenants/propagation';

type Answer = (req: Request, res: Response, status: number, body: unknown, headers?: Record<string, string>, error?: ErrorCode) => Promise<void>;
type Middleware = (req: Request, res: Response, next: (err?: unknown) => void) => void;

export interface LimitsRoutesDeps {
  limits: LimitsAdmin;
  answer: Answer;
  /** 503 change_not_propagated with `extra` beside the code. */
  notPropagated(req: Request, res: Response, extra: Record<string, unknown>, p: PropagationResult): Promise<void>;
  named(route: string): Middleware;
  body: Middleware;
  methodNotAllowed(allow: string): (req: Request, res: Response) => Promise<void>;
}

/** `/admin/tenants/{id}/limits` and `/admin/plans[/{name}]` (#30; docs/API.md "Plans and per-tenant limits"). */
export function limitsRoutes(router: Router, deps: LimitsRoutesDeps): void {
  const { limits, answer } = deps;
  const invalid = (req: Request, res: Response, problem: string) => answer(req, res, 400, errorBody('invalid_limits', { problem }), {}, 'invalid_limits');
  const inForce = (req: Request, res: Response, status: number, key: string, view: Record<string, unknown>, p: PropagationResult) =>
    p.confirmed ? answer(req, res, status, view) : deps.notPropagated(req, res, { [key]: view }, p);

  const setLimits = (replace: boolean) => async (req: Request, res: Response) => {
    const tenantId = tenantIdParam(req);
    const input = parseSetLimits(jsonBody(req), replace);
    if (typeof input === 'string') return invalid(req, res, input);
    const out = await limits.set(tenantId, input);
    if (out === undefined) throw new RelayError('tenant_not_found');
    if (out === 'unknown_plan') return answer(req, res, 404, errorBody('plan_not_found', { problem: `no plan named "${String(input.plan)}"` }), {}, 'plan_not_found');
    await inForce(req, res, 200, 'limits', limitsView(out.record), out.propagation);
  };
  router
    .route('/tenants/:id/limits')
    .get(deps.named('get_limits'), async (req, res) => {
      const record = await limits.get(tenantIdParam(req));
      if (!record) throw new RelayError('tenant_not_found');
      await answer(req, res, 200, limitsView(record));
    })
    .put(deps.named('set_limits'), deps.body, setLimits(true))
    .patch(deps.named('update_limits'), deps.body, setLimits(false))
    .all(deps.methodNotAllowed('GET, PUT, PATCH'));

  router
    .route('/plans')
    .get(deps.named('list_plans'), async (req, res) => {
      await answer(req, res, 200, { plans: (await limits.listPlans()).map(planView) });
    })
    .all(deps.methodNotAllowed('GET'));

  router
    .route('/plans/:name')
    .get(deps.named('get_plan'), async (req, res) => {
      const plan = await limits.getPlan(planParam(req));
      if (!plan) throw new RelayError('plan_not_found');
      await answer(req, res, 200, planView(plan));
    })
    .put(deps.named('put_plan'), deps.body, async (req, res) => {
      const name = planParam(req);
      const body = jsonBody(req);
      const keys = typeof body === 'object' && body !== null && !Array.isArray(body) ? Object.keys(body) : undefined;
      if (keys === undefined || keys.some((k) => k !== 'limits') || !keys.includes('limits')) return invalid(req, res, 'the body is {"limits": {<limit name>: <whole number>, ...}}');
      const doc = parseLimits((body as { limits: unknown }).limits);
      if (typeof doc === 'string') return invalid(req, res, doc);
      const out = await limits.putPlan(name, doc);
      await inForce(req, res, out.created ? 201 : 200, 'plan', planView(out.plan), out.propagation);
    })
    .delete(deps.named('delete_plan'), async (req, res) => {
      const out = await limits.deletePlan(planParam(req));
      if (out === 'not_found') throw new RelayError('plan_not_found');
      if (out !== 'deleted') return answer(req, res, 409, errorBody('plan_in_use', { problem: `${out.inUse} tenant(s) are on this plan; move them to another plan first`, tenants: out.inUse }), {}, 'plan_in_use');
      await answer(req, res, 200, { name: planParam(req), deleted: true });
    })
    .all(deps.methodNotAllowed('GET, PUT, DELETE'));
}

/** `{plan?, overrides?}`: PUT replaces the overrides (absent: none) and the plan (absent: none); PATCH merges (null unsets). */
export function parseSetLimits(body: unknown, replace: boolean): SetTenantLimits | string {
  const shape = 'the body is {"plan"?: <plan name> | null, "overrides"?: {<limit name>: <whole number>' + (replace ? '' : ' | null') + ', ...}}';
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return shape;
  const b = body as Record<string, unknown>;
  const unknown = Object.keys(b).find((k) => k !== 'plan' && k !== 'overrides');
  if (unknown !== undefined) return `unknown field "${unknown.slice(0, 64)}"; ${shape}`;
  if (!replace && b.plan === undefined && b.overrides === undefined) return `nothing to change; ${shape}`;
  let plan: string | null | undefined;
  if (b.plan === null || b.plan === undefined) plan = replace ? null : (b.plan as null | undefined);
  else if (typeof b.plan === 'string' && PLAN_NAME.test(b.plan)) plan = b.plan;
  else return `plan must be a plan name (${PLAN_NAME.source}) or null`;
  const overrides = b.overrides === undefined ? {} : replace ? parseLimits(b.overrides) : parseLimits(b.overrides, true);
  if (typeof overrides === 'string') return overrides;
  if (replace) return { plan, replace: true, overrides: overrides as PartialLimits };
  return { ...(plan !== undefined && { plan }), replace: false, overrides: overrides as LimitsPatch };
}

function limitsView(r: TenantLimitsRecord): Record<string, unknown> {
  return { tenant_id: r.tenantId, plan: r.plan, overrides: r.overrides, limits: r.limits, limits_version: r.version };
}

function planView(p: Plan): Record<string, unknown> {
  return { name: p.name, limits: p.limits, version: p.version, tenants: p.tenants, created_at: p.createdAt.toISOString(), updated_at: p.updatedAt.toISOString() };
}


function planParam(req: Request): string {
  const name = req.params.name;
  if (typeof name !== 'string' || !PLAN_NAME.test(name)) throw new RelayError('invalid_limits', `plan names match ${PLAN_NAME.source}`);
  return name;
}
