import { isCanonicalUuid } from '@service-relay/core';
import type { TenantAction } from '../tenants/tenant-admin';
import { webhookAction } from './webhook-routes';

/** POST paths under /admin/tenants/{id}/ and what they do. */
export const ACTIONS: ReadonlyArray<readonly [string, TenantAction]> = [
  ['disable', 'disable'],
  ['enable', 'enable'],
  ['jwt_secret/rotate', 'rotate'],
  ['jwt_secret/expire_previous', 'expire_previous'],
  ['jwt_secret/revoke_all', 'revoke_all'],
  // `?keep_previous=true` (#33): the old secret stays accepted until host_sync/expire_previous (audited as rotate_host_sync).
  ['host_sync/rotate', 'rotate_host_sync'],
  ['host_sync/expire_previous', 'expire_previous_host_sync'],
];

export interface AdminCall {
  /** The route's name (create, list, get, update, delete, audit, explain_token, usage, tenant_usage, a TenantAction, or get/set/reset_channel_rules), or "unknown". */
  action: string;
  /** The tenant the path names, when it is a well-formed id. */
  tenantId: string | null;
}

const ACTION_BY_SUFFIX = new Map(ACTIONS);

/** POST paths under /admin/tenants/{id}/users/{user_id}/ (#13) and their audit action. */
export const USER_ACTIONS: ReadonlyArray<readonly [string, string]> = [
  ['revoke_tokens', 'revoke_user_tokens'],
  ['disconnect', 'disconnect_user'],
];
const USER_ACTION_BY_SUFFIX = new Map(USER_ACTIONS);

/** `/admin/tenants/{id}/channel_rules`: the audit action of each method. */
export const CHANNEL_RULES_PATH = 'channel_rules';
const CHANNEL_RULES_ACTIONS: Readonly<Record<string, string>> = { GET: 'get_channel_rules', PUT: 'set_channel_rules', DELETE: 'reset_channel_rules' };

/** `/admin/tenants/{id}/limits` and `/admin/plans[/{name}]` (#30): the audit action of each method. */
const LIMITS_PATH = 'limits';
const LIMITS_ACTIONS: Readonly<Record<string, string>> = { GET: 'get_limits', PUT: 'set_limits', PATCH: 'update_limits' };
const PLAN_ACTIONS: Readonly<Record<string, string>> = { GET: 'get_plan', PUT: 'put_plan', DELETE: 'delete_plan' };
/** `/admin/tenants/{id}/callbacks[/secret/…]` (#32): the audit action of each method and path. */
const CALLBACKS_ACTIONS: Readonly<Record<string, string>> = { GET: 'get_callbacks', PUT: 'set_callbacks', DELETE: 'remove_callbacks' };
const CALLBACKS_SECRET_ACTIONS: Readonly<Record<string, string>> = { 'callbacks/secret/rotate': 'callbacks_rotate_secret', 'callbacks/secret/expire_previous': 'callbacks_expire_previous' };

function planAction(method: string, named: boolean): string {
  if (!named) return method === 'GET' ? 'list_plans' : 'unknown';
  return PLAN_ACTIONS[method] ?? 'unknown';
}

/**
 * What an admin request asks for, from its method and path under /admin,
 * known before authentication so that a refused call is recorded with what
 * it tried. Matches as the router does (case-insensitive, one trailing slash).
 */
export function describeAdminCall(method: string, path: string): AdminCall {
  const segments = path.replace(/\/$/, '').split('/').slice(1);
  const [first, id, ...rest] = segments;
  const head = first?.toLowerCase();
  const m = method === 'HEAD' ? 'GET' : method;
  if (head === 'audit' && segments.length === 1) return { action: m === 'GET' ? 'audit' : 'unknown', tenantId: null };
  if (head === 'live' && segments.length === 1) return { action: m === 'GET' ? 'live' : 'unknown', tenantId: null };
  if (head === 'secrets-key' && segments.length === 1) return { action: m === 'GET' ? 'secrets_key' : 'unknown', tenantId: null };
  if (head === 'usage' && segments.length === 1) return { action: m === 'GET' ? 'usage' : 'unknown', tenantId: null };
  if (head === 'explain_token' && segments.length === 1) return { action: m === 'POST' ? 'explain_token' : 'unknown', tenantId: null };
  if (head === 'plans' && segments.length <= 2) return { action: planAction(m, id !== undefined), tenantId: null };
  if (head !== 'tenants') return { action: 'unknown', tenantId: null };
  if (id === undefined) return { action: m === 'POST' ? 'create' : m === 'GET' ? 'list' : 'unknown', tenantId: null };
  const tenantId = isCanonicalUuid(id) ? id : null;
  if (rest.length === 0) return { action: m === 'GET' ? 'get' : m === 'PATCH' ? 'update' : m === 'DELETE' ? 'delete' : 'unknown', tenantId };
  const suffix = rest.join('/').toLowerCase();
  if (rest[0]!.toLowerCase() === 'webhooks') return { action: webhookAction(m, rest), tenantId };
  if (suffix === 'usage') return { action: m === 'GET' ? 'tenant_usage' : 'unknown', tenantId };
  if (suffix === LIMITS_PATH) return { action: LIMITS_ACTIONS[m] ?? 'unknown', tenantId };
  if (suffix === 'callbacks') return { action: CALLBACKS_ACTIONS[m] ?? 'unknown', tenantId };
  if (CALLBACKS_SECRET_ACTIONS[suffix] !== undefined) return { action: m === 'POST' ? CALLBACKS_SECRET_ACTIONS[suffix]! : 'unknown', tenantId };
  if (suffix === CHANNEL_RULES_PATH) return { action: CHANNEL_RULES_ACTIONS[m] ?? 'unknown', tenantId };
  if (rest.length === 3 && rest[0]!.toLowerCase() === 'users') return { action: (m === 'POST' && USER_ACTION_BY_SUFFIX.get(rest[2]!.toLowerCase())) || 'unknown', tenantId };
  const action = m === 'POST' ? ACTION_BY_SUFFIX.get(suffix) : undefined;
  return { action: action ?? 'unknown', tenantId };
}
