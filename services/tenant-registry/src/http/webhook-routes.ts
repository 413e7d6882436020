import type { Request, Response, Router } from 'express';
import { errorBody, httpStatusFor, isCanonicalUuid, RelayError, type ErrorCode } from '@service-relay/core';
import type { AttemptRow } from '../store/webhook-store';
import { MAX_ENDPOINTS_PER_TENANT } from '../store/webhook-store';
import type { EndpointWithStatus, WebhooksAdmin } from '../webhooks/webhooks-admin';
import type { PropagationResult } from '../tenants/propagation';

export interface WebhookAnswer {
  status: number;
  body: unknown;
  /** The error code, for the audit log. */
  error?: ErrorCode;
  allow?: string;
  /** A committed change not confirmed in force everywhere (503 change_not_propagated): what was committed, and who is behind. */
  notPropagated?: { committed: Record<string, unknown>; propagation: PropagationResult };
}

/** The audit action of a webhook call (`…/webhooks[/{id}[/…]]`), from its method and the path after the tenant. */
export function webhookAction(method: string, rest: readonly string[]): string {
  const [, id, ...tail] = rest.map((s) => s.toLowerCase());
  const m = method === 'HEAD' ? 'GET' : method;
  if (id === undefined) return m === 'GET' ? 'list_webhooks' : m === 'POST' ? 'create_webhook' : 'unknown';
  const sub = tail.join('/');
  if (sub === '') return m === 'GET' ? 'get_webhook' : m === 'DELETE' ? 'delete_webhook' : 'unknown';
  if (m === 'POST' && (sub === 'enable' || sub === 'disable')) return `${sub}_webhook`;
  if (m === 'POST' && sub === 'secret/rotate') return 'rotate_webhook_secret';
  if (m === 'GET' && sub === 'deliveries') return 'webhook_deliveries';
  return 'unknown';
}

/**
 * `/…/tenants/{id}/webhooks[/{endpoint_id}[/enable|disable|secret/rotate|deliveries]]`,
 * the same calls and answers on the admin API and the host server API
 * (docs/API.md "Webhooks"). `rest` is the path after the tenant, split
 * (`['webhooks', …]`); `body` the parsed JSON body (undefined: none).
 */
export async function webhookCall(admin: WebhooksAdmin, tenantId: string, method: string, rest: readonly string[], body: unknown, query: Record<string, unknown>): Promise<WebhookAnswer | undefined> {
  const [head, id, ...tail] = rest;
  if (head !== 'webhooks') return undefined;
  const m = method === 'HEAD' ? 'GET' : method;
  if (id === undefined) {
    if (m === 'GET') return { status: 200, body: { webhooks: (await admin.list(tenantId)).map(endpointView) } };
    if (m !== 'POST') return notAllowed('GET, POST');
    const out = await admin.create(tenantId, body);
    if (out === undefined) return fail('tenant_not_found');
    if (out === 'too_many') return fail('too_many_webhooks', `a tenant has at most ${MAX_ENDPOINTS_PER_TENANT} webhook endpoints`);
    if ('code' in out) return fail(out.code, out.problem);
    return inForce(201, { ...endpointView(out.endpoint), signing_secret: out.secret }, out.propagation);
  }
  if (!isCanonicalUuid(id)) return fail('webhook_not_found');
  const sub = tail.join('/');
  if (sub === '') {
    if (m === 'GET') {
      const e = await admin.get(tenantId, id);
      return e ? { status: 200, body: endpointView(e) } : fail('webhook_not_found');
    }
    if (m !== 'DELETE') return notAllowed('GET, DELETE');
    const out = await admin.remove(tenantId, id);
    return out ? inForce(200, { endpoint_id: id, deleted: true }, out.propagation) : fail('webhook_not_found');
  }
  if (sub === 'enable' || sub === 'disable') {
    if (m !== 'POST') return notAllowed('POST');
    const out = await admin.setEnabled(tenantId, id, sub === 'enable');
    return out ? inForce(200, endpointView(out.endpoint), out.propagation) : fail('webhook_not_found');
  }
  if (sub === 'secret/rotate') {
    if (m !== 'POST') return notAllowed('POST');
    const out = await admin.rotate(tenantId, id, body);
    if (out === undefined) return fail('webhook_not_found');
    if ('code' in out) return fail(out.code, out.problem);
    return { status: 200, body: { ...endpointView(out.endpoint), signing_secret: out.secret } };
  }
  if (sub === 'deliveries') {
    if (m !== 'GET') return notAllowed('GET');
    const limit = query.limit === undefined ? 20 : Number(query.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) return fail('invalid_query', 'limit is 1..100');
    const out = await admin.deliveries(tenantId, id, limit);
    return out ? { status: 200, body: { ...endpointView(out.endpoint), attempts: out.attempts.map(attemptView) } } : fail('webhook_not_found');
  }
  return fail('not_found');
}

type Middleware = (req: Request, res: Response, next: (err?: unknown) => void) => void;

/** `/admin/tenants/{id}/webhooks…` on the admin router (audited through its `answer`). */
export function adminWebhookRoutes(
  router: Router,
  deps: {
    webhooks: WebhooksAdmin;
    tenantExists(tenantId: string): Promise<boolean>;
    answer(req: Request, res: Response, status: number, body: unknown, headers?: Record<string, string>, error?: ErrorCode): Promise<void>;
    named(route: string): Middleware;
    body: Middleware;
    tenantIdParam(req: Request): string;
    optionalJsonBody(req: Request): unknown;
  },
): void {
  router.use('/tenants/:id/webhooks', deps.named('webhooks'), deps.body, async (req, res, next) => {
    const tenantId = deps.tenantIdParam(req);
    if (!(await deps.tenantExists(tenantId))) throw new RelayError('tenant_not_found');
    const rest = ['webhooks', ...req.path.split('/').filter((s) => s !== '')];
    const a = await webhookCall(deps.webhooks, tenantId, req.method, rest, deps.optionalJsonBody(req), req.query);
    if (!a) return next();
    res.locals.route = webhookAction(req.method, rest);
    // The admin API also names the consumers still behind, as for every change it waits for.
    const n = a.notPropagated;
    const body = n ? errorBody('change_not_propagated', { webhook: n.committed, pending_consumers: n.propagation.pending.map((c) => ({ consumer_id: c.consumerId, kind: c.kind, applied_seq: c.appliedSeq })) }) : a.body;
    await deps.answer(req, res, a.status, body, { ...(a.allow && { allow: a.allow }), ...(a.notPropagated && { 'retry-after': '1' }) }, a.error);
  });
}

export function endpointView(e: EndpointWithStatus): Record<string, unknown> {
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  const overlap = e.previousSecret !== null && e.previousExpiresAt !== null && e.previousExpiresAt.getTime() > Date.now();
  return {
    endpoint_id: e.endpointId,
    tenant_id: e.tenantId,
    url: e.url,
    events: e.events,
    enabled: e.enabled,
    previous_secret_expires_at: overlap ? iso(e.previousExpiresAt) : null,
    queued_events: e.queued,
    failures: e.failures,
    failing_since: iso(e.failingSince),
    next_attempt_at: iso(e.nextAttemptAt),
    created_at: iso(e.createdAt),
    updated_at: iso(e.updatedAt),
  };
}

function attemptView(a: AttemptRow): Record<string, unknown> {
  return {
    attempted_at: a.attemptedAt.toISOString(),
    events: a.events,
    webhook_id: a.firstEventId,
    status: a.status,
    ok: a.status !== null && a.status >= 200 && a.status < 300,
    error: a.error,
    latency_ms: a.latencyMs,
    next_attempt_at: a.nextAttemptAt?.toISOString() ?? null,
  };
}

/**
 * The committed answer, or, when the change it made is not confirmed in
 * force on every consumer, 503 change_not_propagated with that same answer
 * under `webhook` (a new signing secret included: it is shown only here).
 */
function inForce(status: number, body: Record<string, unknown>, p: PropagationResult): WebhookAnswer {
  if (p.confirmed) return { status, body };
  return { status: httpStatusFor('change_not_propagated'), body: errorBody('change_not_propagated', { webhook: body }), error: 'change_not_propagated', notPropagated: { committed: body, propagation: p } };
}

function fail(code: ErrorCode, problem?: string): WebhookAnswer {
  return { status: httpStatusFor(code), body: errorBody(code, problem === undefined ? undefined : { problem }), error: code };
}

function notAllowed(allow: string): WebhookAnswer {
  return { status: 405, body: errorBody('method_not_allowed'), error: 'method_not_allowed', allow };
}
