import type { CliRequest } from './commands';
import { UsageError } from './delete-tenant';

// The admin CLI's `callbacks` command (#32 item 4): a tenant's subscribe and
// publish callbacks. `set` prints the signing secret once (the first time a
// tenant gets callbacks, and on rotate-secret).

const SUBS = ['get', 'set', 'remove', 'rotate-secret', 'expire-previous'] as const;

/** `callbacks get|remove|rotate-secret|expire-previous ID`, `callbacks set ID --url U [--subscribe P]... [--publish P]... [--timeout-ms N]`. */
export function callbacksRequest(args: string[]): CliRequest {
  const [sub, id, ...rest] = args;
  if (!SUBS.includes(sub as (typeof SUBS)[number])) throw new UsageError(`callbacks takes ${SUBS.join(', ')}, then a tenant id`);
  if (id === undefined || id.startsWith('--')) throw new UsageError(`callbacks ${sub} takes a tenant id`);
  const path = `/admin/tenants/${encodeURIComponent(id)}/callbacks`;
  if (sub !== 'set') {
    if (rest.length !== 0) throw new UsageError(`callbacks ${sub} takes exactly one tenant id`);
    if (sub === 'get') return { method: 'GET', path, tenant: id };
    if (sub === 'remove') return { method: 'DELETE', path, tenant: id };
    return { method: 'POST', path: `${path}/secret/${sub === 'rotate-secret' ? 'rotate' : 'expire_previous'}`, tenant: id };
  }
  const body: { url?: string; subscribe: string[]; publish: string[]; timeout_ms?: number } = { subscribe: [], publish: [] };
  for (let i = 0; i < rest.length; i += 2) {
    const flag = rest[i]!;
    const value = rest[i + 1];
    if (value === undefined) throw new UsageError(`callbacks set: ${flag} takes a value`);
    if (flag === '--url') body.url = value;
    else if (flag === '--subscribe') body.subscribe.push(value);
    else if (flag === '--publish') body.publish.push(value);
    else if (flag === '--timeout-ms' && /^\d{1,6}$/.test(value)) body.timeout_ms = Number(value);
    else throw new UsageError(`callbacks set: unexpected ${JSON.stringify(flag)} (--url U, --subscribe P, --publish P, --timeout-ms N)`);
  }
  if (body.url === undefined) throw new UsageError('callbacks set needs --url');
  return { method: 'PUT', path, tenant: id, body: JSON.stringify(body) };
}
