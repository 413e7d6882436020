import type { CliRequest } from './commands';
import { UsageError } from './delete-tenant';

// The admin CLI's `webhooks` command (#32): one request per subcommand.

const SUBCOMMANDS = ['list', 'create', 'get', 'delete', 'enable', 'disable', 'rotate-secret', 'deliveries'] as const;

/** `webhooks SUB TENANT_ID [ENDPOINT_ID] [flags]`. */
export function webhooksRequest(args: string[]): CliRequest {
  const [sub, tenant, ...rest] = args;
  if (!SUBCOMMANDS.includes(sub as (typeof SUBCOMMANDS)[number]) || tenant === undefined || tenant.startsWith('--')) {
    throw new UsageError(`webhooks takes ${SUBCOMMANDS.join('|')}, then a tenant id`);
  }
  const base = `/admin/tenants/${encodeURIComponent(tenant)}/webhooks`;
  const flags = new Map<string, string>();
  const positional: string[] = [];
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const v = rest[++i];
    if (v === undefined) throw new UsageError(`webhooks ${sub}: ${a} takes a value`);
    flags.set(a, v);
  }
  const allowed: Record<string, string[]> = { create: ['--url', '--events'], 'rotate-secret': ['--overlap'], deliveries: ['--limit'] };
  const stray = [...flags.keys()].find((f) => !(allowed[sub!] ?? []).includes(f));
  if (stray !== undefined) throw new UsageError(`webhooks ${sub}: unexpected ${stray}`);
  if (sub === 'list' || sub === 'create') {
    if (positional.length !== 0) throw new UsageError(`webhooks ${sub} takes a tenant id only`);
    if (sub === 'list') return { method: 'GET', path: base, tenant };
    const url = flags.get('--url');
    const events = flags.get('--events');
    if (url === undefined || events === undefined) throw new UsageError('webhooks create needs --url URL and --events a,b,…');
    return { method: 'POST', path: base, tenant, body: JSON.stringify({ url, events: events.split(',').filter((e) => e !== '') }) };
  }
  if (positional.length !== 1) throw new UsageError(`webhooks ${sub} takes a tenant id and an endpoint id`);
  const one = `${base}/${encodeURIComponent(positional[0]!)}`;
  switch (sub) {
    case 'get':
      return { method: 'GET', path: one, tenant };
    case 'delete':
      return { method: 'DELETE', path: one, tenant };
    case 'enable':
    case 'disable':
      return { method: 'POST', path: `${one}/${sub}`, tenant };
    case 'rotate-secret': {
      const overlap = flags.get('--overlap');
      if (overlap !== undefined && !/^\d+$/.test(overlap)) throw new UsageError('webhooks rotate-secret: --overlap takes whole seconds');
      return { method: 'POST', path: `${one}/secret/rotate`, tenant, ...(overlap !== undefined && { body: JSON.stringify({ overlap_s: Number(overlap) }) }) };
    }
    default: {
      const limit = flags.get('--limit');
      return { method: 'GET', path: `${one}/deliveries${limit === undefined ? '' : `?limit=${encodeURIComponent(limit)}`}`, tenant };
    }
  }
}
