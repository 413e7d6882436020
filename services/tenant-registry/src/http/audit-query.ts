import { isCanonicalUuid, RelayError } from '@service-relay/core';
import { AUDIT_OUTCOMES, type AuditFilter, type AuditOutcome } from '../audit/audit-store';
import { parseTimestamp, UsageQueryProblem } from './usage-query';

const ACTION = /^[a-z_]{1,40}$/;
const MAX_ACTIONS = 20;
const KNOWN = new Set(['limit', 'cursor', 'tenant_id', 'action', 'outcome', 'since', 'until']);

/**
 * The audit listing's filter (docs/API.md "Audit log"): `tenant_id`, `action`
 * (repeatable: any of them), `outcome` (ok, refused, failed), `since` and
 * `until` (RFC 3339, `until` exclusive). A malformed `tenant_id` throws
 * invalid_tenant_id, as before; every other problem is returned as text for
 * `400 invalid_query`.
 */
export function parseAuditFilter(query: Record<string, unknown>): AuditFilter | string {
  const unknown = Object.keys(query).find((k) => !KNOWN.has(k));
  if (unknown !== undefined) return `unknown query parameter ${unknown.slice(0, 40)}`;
  const { tenant_id: tenantId, action, outcome, since, until } = query;
  if (tenantId !== undefined && typeof tenantId !== 'string') throw new RelayError('invalid_query');
  if (tenantId !== undefined && !isCanonicalUuid(tenantId)) throw new RelayError('invalid_tenant_id');
  const actions = action === undefined ? undefined : Array.isArray(action) ? action : [action];
  if (actions !== undefined && (actions.length > MAX_ACTIONS || !actions.every((a) => typeof a === 'string' && ACTION.test(a)))) {
    return `action is an audit action name (lowercase letters and _), at most ${MAX_ACTIONS} of them`;
  }
  if (outcome !== undefined && !(AUDIT_OUTCOMES as readonly unknown[]).includes(outcome)) return `outcome is one of ${AUDIT_OUTCOMES.join(', ')}`;
  try {
    const sinceMs = since === undefined ? undefined : parseTimestamp(since, 'since');
    const untilMs = until === undefined ? undefined : parseTimestamp(until, 'until');
    if (sinceMs !== undefined && untilMs !== undefined && !(untilMs > sinceMs)) return 'since must be before until';
    return {
      tenantId,
      actions: actions as string[] | undefined,
      outcome: outcome as AuditOutcome | undefined,
      since: sinceMs === undefined ? undefined : new Date(sinceMs),
      until: untilMs === undefined ? undefined : new Date(untilMs),
    };
  } catch (err) {
    if (err instanceof UsageQueryProblem) return err.message;
    throw err;
  }
}
