import type { CliRequest } from './commands';
import { UsageError } from './delete-tenant';

// The admin CLI's plans and per-tenant limits commands (#30): get-limits,
// set-limits, set-plan and the plan commands build their requests here.

export const limitsPath = (id: string) => `/admin/tenants/${encodeURIComponent(id)}/limits`;

/** `--set NAME=N` pairs into a limits document (the registry judges names and numbers). */
function limitsFlags(name: string, args: string[], extra: (flag: string, value: string | undefined) => number = () => -1): Record<string, number | null> {
  const limits: Record<string, number | null> = {};
  for (let i = 0; i < args.length; i++) {
    const flag = args[i]!;
    const value = args[i + 1];
    const used = extra(flag, value);
    if (used >= 0) {
      i += used;
      continue;
    }
    if ((flag !== '--set' && flag !== '--unset') || value === undefined) throw new UsageError(`${name}: unexpected ${JSON.stringify(flag)}`);
    i++;
    if (flag === '--unset') limits[value] = null;
    else {
      const m = /^([a-z_]+)=(-?\d+)$/.exec(value);
      if (!m) throw new UsageError(`${name}: --set takes NAME=N (a whole number), got ${JSON.stringify(value)}`);
      limits[m[1]!] = Number(m[2]);
    }
  }
  return limits;
}

/** `set-limits ID ...`: a PATCH of the overrides and plan, or with --replace a PUT of both. */
export function setLimitsRequest(args: string[]): CliRequest {
  const [id, ...rest] = args;
  if (id === undefined || id.startsWith('--')) throw new UsageError('set-limits takes a tenant id, then what to change');
  let plan: string | null | undefined;
  let replace = false;
  const overrides = limitsFlags('set-limits', rest, (flag, value) => {
    if (flag === '--replace' || flag === '--no-plan') {
      if (flag === '--replace') replace = true;
      else plan = null;
      return 0;
    }
    if (flag !== '--plan') return -1;
    if (value === undefined) throw new UsageError('set-limits: --plan takes a plan name');
    plan = value;
    return 1;
  });
  if (replace && Object.values(overrides).includes(null)) throw new UsageError('set-limits --replace sets every override: leave a name out instead of --unset');
  if (!replace && plan === undefined && Object.keys(overrides).length === 0) throw new UsageError('set-limits needs something to change: --set, --unset, --plan or --no-plan');
  const body = { ...(plan !== undefined && { plan }), overrides };
  return { method: replace ? 'PUT' : 'PATCH', path: limitsPath(id), tenant: id, body: JSON.stringify(body) };
}

export function setPlanRequest(args: string[]): CliRequest {
  const [id, plan] = args;
  if (args.length !== 2 || id!.startsWith('--')) throw new UsageError('set-plan takes a tenant id and a plan name (or --none)');
  return { method: 'PATCH', path: limitsPath(id!), tenant: id, body: JSON.stringify({ plan: plan === '--none' ? null : plan }) };
}

export function planRequest(name: string, method: string, args: string[]): CliRequest {
  const [plan, ...rest] = args;
  if (plan === undefined || plan.startsWith('--')) throw new UsageError(`${name} takes a plan name`);
  const path = `/admin/plans/${encodeURIComponent(plan)}`;
  if (method !== 'PUT') {
    if (rest.length !== 0) throw new UsageError(`${name} takes exactly one plan name`);
    return { method, path };
  }
  const limits = limitsFlags(name, rest);
  if (Object.values(limits).includes(null)) throw new UsageError(`${name}: a plan is replaced whole; leave a name out instead of --unset`);
  return { method, path, body: JSON.stringify({ limits }) };
}
