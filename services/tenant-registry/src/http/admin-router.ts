import { Router, type NextFunction, type Request, type Response } from 'express';
import { errorBody, httpStatusFor, isCanonicalUuid, RelayError, type ErrorCode, type Logger } from '@service-relay/core';
import { channelRulesJson, parseChannelRules } from '@service-relay/channels';
import { authorizationOf, bearerToken, MAX_ADMIN_BODY_BYTES, MAX_EXPLAIN_BODY_BYTES, MAX_META_BODY_BYTES, MAX_RULES_BODY_BYTES, readBodyLimited, sendJson, WWW_AUTHENTICATE } from '@service-relay/edge';
import { UNAUTHENTICATED, type AdminTokens } from '../audit/admin-tokens';
import type { AuditLog } from '../audit/audit-log';
import type { RegistryMetrics } from '../metrics';
import type { TenantChannelRules } from '../store/channel-rules-store';
import type { TenantDeletion } from '../store/tenant-deletion';
import type { PropagationResult } from '../tenants/propagation';
import type { AdminOutcome, TenantAdmin } from '../tenants/tenant-admin';
import { toTenantView } from '../tenants/tenant';
import { MAX_LABELS, parseTenantFilter, parseTenantMeta } from '../tenants/tenant-meta';
import { isProblem, parseRevokeRequest, parseUserId } from '../tenants/host-requests';
import type { UserActionOutcome, UserActions } from '../tenants/user-actions';
import { ACTIONS, CHANNEL_RULES_PATH, describeAdminCall, USER_ACTIONS, type AdminCall } from './admin-call';
import { parseAuditFilter } from './audit-query';
import { decodeAuditCursor, encodeAuditCursor, toAuditView } from './audit-view';
import { decodeCursor, encodeCursor, parseLimit } from './list-cursor';
import { requestLog } from './request-log';
import { errorCodeFor, NO_STORE } from './send';
import type { TokenExplainer } from '../verifier/token-explainer';
import type { AdminUsage } from './admin-usage';
import type { LimitsAdmin } from '../tenants/limits-admin';
import { limitsRoutes } from './admin-limits';
import { actionWithQuery, parseFlag, tenantIdParam } from './admin-params';
import { callbacksRoutes } from './admin-callbacks';
import type { CallbacksAdmin } from '../tenants/callbacks-admin';
import type { AdminLive } from './admin-live';
import type { WebhooksAdmin } from '../webhooks/webhooks-admin';
import { adminWebhookRoutes } from './webhook-routes';

/** Reads the body into `req.body` (a Buffer); past the limit `payload_too_large`, a client gone mid-body `invalid_body`. */
function rawBodyUpTo(limit: number) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    readBodyLimited(req, limit).then(
      (body) => {
        if (body === undefined) return next(new RelayError('payload_too_large'));
        req.body = body;
        next();
      },
      () => next(new RelayError('invalid_body')),
    );
  };
}
const rawBody = rawBodyUpTo(MAX_ADMIN_BODY_BYTES);

export interface AdminRouterDeps {
  admin: TenantAdmin;
  /** A user's token revocation and disconnect (#13), the same actions the host server API takes; absent, those routes answer 404. */
  users?: UserActions | undefined;
  /** The verifier's explanation of a token (explain_token); absent, that route answers 404. */
  explainer?: TokenExplainer | undefined;
  /** Usage reads (#30); absent, those routes answer 404. */
  usage?: AdminUsage | undefined;
  /** Plans and per-tenant limits (#30); absent, those routes answer 404. */
  limits?: LimitsAdmin | undefined;
  /** Subscribe/publish callbacks (#32); absent, those routes answer 404. */
  callbacks?: CallbacksAdmin | undefined;
  /** The live view of realtime instances and feed consumers (#31); absent, that route answers 404. */
  live?: AdminLive | undefined;
  /** Webhook endpoints (#32); absent, those routes answer 404. */
  webhooks?: WebhooksAdmin | undefined;
  secretsKey?: { status(): Promise<unknown> } | undefined; // GET /admin/secrets-key (#33: the keyring's state); absent, 404
  adminTokens: AdminTokens;
  audit: AuditLog;
  metrics: RegistryMetrics;
  logger: Logger;
}

/** Sends an admin answer; `error` is its error code, for the audit log. */
type Answer = (req: Request, res: Response, status: number, body: unknown, headers?: Record<string, string>, error?: ErrorCode) => Promise<void>;

/**
 * The admin API of CONTRACT.md, mounted at /admin. Every answer, refusals
 * included, goes out through `answer`, which records the call in the audit
 * log first (docs/ARCHITECTURE.md "Admin audit log").
 */
export function adminRouter(deps: AdminRouterDeps): Router {
  const { admin, adminTokens, audit, metrics, logger } = deps;
  const router = Router();

  const answer: Answer = async (req, res, status, body, headers = {}, error) => {
    const call = (res.locals.call as AdminCall | undefined) ?? describeAdminCall(req.method, req.path);
    const requestId = res.getHeader('x-request-id');
    await audit.record({
      actor: (res.locals.actor as string | undefined) ?? UNAUTHENTICATED,
      action: call.action,
      method: req.method.slice(0, 16),
      tenantId: call.tenantId,
      status,
      error: error ?? null,
      requestId: typeof requestId === 'string' ? requestId : '',
      clientAddress: req.socket.remoteAddress ?? null,
    });
    sendJson(res, status, body, { ...NO_STORE, ...headers });
  };
  const fail = (req: Request, res: Response, code: ErrorCode, headers?: Record<string, string>) => answer(req, res, httpStatusFor(code), errorBody(code), headers, code);
  const methodNotAllowed = (allow: string) => (req: Request, res: Response) => fail(req, res, 'method_not_allowed', { allow });

  router.use(async (req, res, next) => {
    res.locals.call = describeAdminCall(req.method, req.path);
    res.on('finish', () => metrics.adminRequest((res.locals.route as string | undefined) ?? 'unmatched', res.statusCode));
    const actor = adminTokens.identify(bearerToken(authorizationOf(req)));
    if (actor === undefined) {
      res.locals.route = 'unauthorized';
      return fail(req, res, 'invalid_admin_token', { 'www-authenticate': WWW_AUTHENTICATE.adminBearer });
    }
    res.locals.actor = actor;
    next();
  });

  router
    .route('/tenants')
    .post(named('create'), rawBodyUpTo(MAX_META_BODY_BYTES), async (req, res) => {
      // No body (the contract's create) or {"name": ..., "labels": {...}} (#30).
      const body = optionalJsonBody(req);
      const meta = body === undefined ? {} : parseTenantMeta(body, false);
      if (typeof meta === 'string') return answer(req, res, 400, errorBody('invalid_tenant_meta', { problem: meta }), {}, 'invalid_tenant_meta');
      const created = await admin.create(meta);
      // The new tenant is what this call acted on.
      res.locals.call = { ...(res.locals.call as AdminCall), tenantId: created.tenant.tenantId };
      await answerChange(answer, req, res, 201, created);
    })
    .get(named('list'), async (req, res) => {
      const limit = parseLimit(req.query.limit);
      const cursor = req.query.cursor;
      if (cursor !== undefined && typeof cursor !== 'string') throw new RelayError('invalid_query');
      const filter = parseTenantFilter(req.query.label, req.query.q, req.query.state);
      if (typeof filter === 'string') return answer(req, res, 400, errorBody('invalid_query', { problem: filter }), {}, 'invalid_query');
      const page = await admin.list(limit, cursor === undefined ? undefined : decodeCursor(cursor), filter);
      await answer(req, res, 200, { tenants: page.tenants.map(toTenantView), next_cursor: page.next ? encodeCursor(page.next) : null });
    })
    .all(methodNotAllowed('GET, POST'));

  router
    .route('/tenants/:id')
    .get(named('get'), async (req, res) => {
      const tenant = await admin.get(tenantIdParam(req));
      if (!tenant) throw new RelayError('tenant_not_found');
      await answer(req, res, 200, toTenantView(tenant));
    })
    .patch(named('update'), rawBodyUpTo(MAX_META_BODY_BYTES), async (req, res) => {
      const tenantId = tenantIdParam(req);
      const meta = parseTenantMeta(jsonBody(req), true);
      if (typeof meta === 'string') return answer(req, res, 400, errorBody('invalid_tenant_meta', { problem: meta }), {}, 'invalid_tenant_meta');
      const updated = await admin.updateMeta(tenantId, meta);
      if (!updated) throw new RelayError('tenant_not_found');
      if (updated === 'too_many_labels') {
        return answer(req, res, 400, errorBody('invalid_tenant_meta', { problem: `at most ${MAX_LABELS} labels` }), {}, 'invalid_tenant_meta');
      }
      await answer(req, res, 200, toTenantView(updated));
    })
    .delete(named('delete'), rawBody, requireEmptyBody, async (req, res) => {
      const tenantId = tenantIdParam(req);
      const keepUsage = parseFlag(req.query, 'keep_usage');
      if (typeof keepUsage === 'string') return answer(req, res, 400, errorBody('invalid_query', { problem: keepUsage }), {}, 'invalid_query');
      const outcome = await admin.delete(tenantId, { keepUsage });
      if (!outcome) throw new RelayError('tenant_not_found');
      const view = deletionView(outcome.deletion);
      if (outcome.propagation.confirmed) return answer(req, res, 200, view);
      return notPropagated(answer, req, res, { tenant: view, pending_consumers: pendingView(outcome.propagation) });
    })
    .all(methodNotAllowed('GET, PATCH, DELETE'));

  for (const [path, action] of ACTIONS) {
    router
      .route(`/tenants/:id/${path}`)
      .post(named(action), rawBody, requireEmptyBody, async (req, res) => {
        const chosen = actionWithQuery(action, req.query);
        if (chosen.problem) return answer(req, res, 400, errorBody('invalid_query', { problem: chosen.problem }), {}, 'invalid_query');
        const change = await admin.apply(tenantIdParam(req), chosen.action);
        if (!change) throw new RelayError('tenant_not_found');
        await answerChange(answer, req, res, 200, change);
      })
      .all(methodNotAllowed('POST'));
  }

  router
    .route(`/tenants/:id/${CHANNEL_RULES_PATH}`)
    .get(named('get_channel_rules'), async (req, res) => {
      const rules = await admin.channelRules(tenantIdParam(req));
      if (!rules) throw new RelayError('tenant_not_found');
      await answer(req, res, 200, channelRulesView(rules));
    })
    .put(named('set_channel_rules'), rawBodyUpTo(MAX_RULES_BODY_BYTES), async (req, res) => {
      const tenantId = tenantIdParam(req);
      const rules = parseChannelRules(jsonBody(req));
      if (typeof rules === 'string') return answer(req, res, 400, errorBody('invalid_channel_rules', { problem: rules }), {}, 'invalid_channel_rules');
      const outcome = await admin.setChannelRules(tenantId, rules);
      if (!outcome) throw new RelayError('tenant_not_found');
      await answerRulesChange(answer, req, res, outcome.rules, outcome.propagation);
    })
    .delete(named('reset_channel_rules'), rawBody, requireEmptyBody, async (req, res) => {
      const outcome = await admin.setChannelRules(tenantIdParam(req), null);
      if (!outcome) throw new RelayError('tenant_not_found');
      await answerRulesChange(answer, req, res, outcome.rules, outcome.propagation);
    })
    .all(methodNotAllowed('GET, PUT, DELETE'));

  // An operator's hand on one user (#13): the same actions as the host server
  // API's, for when the host cannot act (an incident, the host itself down).
  if (deps.users) {
    const users = deps.users;
    for (const [path, name] of USER_ACTIONS) {
      router
        .route(`/tenants/:id/users/:user/${path}`)
        .post(named(name), rawBody, async (req, res) => {
          const tenantId = tenantIdParam(req);
          const user = parseUserId(String(req.params.user));
          if (isProblem(user)) return answer(req, res, 400, errorBody(user.code, { problem: user.problem }), {}, user.code);
          const body = optionalJsonBody(req);
          let outcome: UserActionOutcome | undefined;
          if (path === 'revoke_tokens') {
            const parsed = parseRevokeRequest(body, Math.floor(Date.now() / 1000));
            if (isProblem(parsed)) return answer(req, res, 400, errorBody(parsed.code, { problem: parsed.problem }), {}, parsed.code);
            outcome = await users.revokeTokens(tenantId, user, parsed.before);
          } else {
            if (body !== undefined && !(typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0)) throw new RelayError('invalid_body');
            outcome = await users.disconnect(tenantId, user);
          }
          if (!outcome) throw new RelayError('tenant_not_found');
          const view = { tenant_id: tenantId, user_id: outcome.userId, ...(outcome.before !== undefined && { issued_before: outcome.before }) };
          if (outcome.propagation.confirmed) return answer(req, res, 200, view);
          return notPropagated(answer, req, res, { user: view, pending_consumers: pendingView(outcome.propagation) });
        })
        .all(methodNotAllowed('POST'));
    }
  }

  // Why a token is refused (#29): the verifier's own verdict, for an operator.
  // The public answer stays the uniform 401; the token is neither logged nor
  // audited, only the tenant it names.
  if (deps.explainer) {
    const explainer = deps.explainer;
    router
      .route('/explain_token')
      .post(named('explain_token'), rawBodyUpTo(MAX_EXPLAIN_BODY_BYTES), async (req, res) => {
        let body: unknown;
        try {
          body = optionalJsonBody(req);
        } catch {
          body = undefined;
        }
        const token = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>).token : undefined;
        if (typeof token !== 'string' || Object.keys(body as object).length !== 1) {
          return answer(req, res, 400, errorBody('invalid_body', { problem: 'the body is {"token": "<the JWT>"}' }), {}, 'invalid_body');
        }
        const explanation = await explainer.explain(token);
        const tenantId = explanation.claims?.tenant_id;
        if (typeof tenantId === 'string' && isCanonicalUuid(tenantId)) res.locals.call = { ...(res.locals.call as AdminCall), tenantId };
        await answer(req, res, 200, explanation);
      })
      .all(methodNotAllowed('POST'));
  }

  if (deps.usage) {
    const usage = deps.usage;
    router
      .route('/tenants/:id/usage')
      .get(named('tenant_usage'), async (req, res) => {
        const a = await usage.tenant(req, tenantIdParam(req));
        await answer(req, res, a.status, a.body, {}, a.error);
      })
      .all(methodNotAllowed('GET'));
    router
      .route('/usage')
      .get(named('usage'), async (req, res) => {
        const a = await usage.all(req);
        await answer(req, res, a.status, a.body, {}, a.error);
      })
      .all(methodNotAllowed('GET'));
  }

  const notPropagatedWith = (req: Request, res: Response, extra: Record<string, unknown>, p: PropagationResult) => notPropagated(answer, req, res, { ...extra, pending_consumers: pendingView(p) });
  const emptyBody = (req: Request, res: Response, next: NextFunction) => rawBody(req, res, (err?: unknown) => (err ? next(err) : requireEmptyBody(req, res, next)));
  if (deps.limits) {
    limitsRoutes(router, {
      limits: deps.limits,
      answer,
      notPropagated: notPropagatedWith,
      named,
      body: rawBodyUpTo(MAX_META_BODY_BYTES),
      methodNotAllowed,
    });
  }

  if (deps.callbacks) callbacksRoutes(router, { callbacks: deps.callbacks, answer, notPropagated: notPropagatedWith, named, body: rawBodyUpTo(MAX_META_BODY_BYTES), emptyBody, methodNotAllowed });
  const { live, secretsKey } = deps; // #31, the console's Live page; #33, the keyring's state
  if (live) router.route('/live').get(named('live'), async (req, res) => answer(req, res, 200, await live.read())).all(methodNotAllowed('GET'));
  if (secretsKey) router.route('/secrets-key').get(named('secrets_key'), async (req, res) => answer(req, res, 200, await secretsKey.status())).all(methodNotAllowed('GET'));
  // One handler for the admin API and the host server API (webhook-routes.ts).
  if (deps.webhooks) adminWebhookRoutes(router, { webhooks: deps.webhooks, tenantExists: async (id) => (await admin.get(id)) !== undefined, answer, named, body: rawBodyUpTo(MAX_META_BODY_BYTES), tenantIdParam, optionalJsonBody });

  router
    .route('/audit')
    .get(named('audit'), async (req, res) => {
      const limit = parseLimit(req.query.limit);
      const { cursor } = req.query;
      if (cursor !== undefined && typeof cursor !== 'string') throw new RelayError('invalid_query');
      const filter = parseAuditFilter(req.query);
      if (typeof filter === 'string') return answer(req, res, 400, errorBody('invalid_query', { problem: filter }), {}, 'invalid_query');
      const page = await audit.list(limit, cursor === undefined ? undefined : decodeAuditCursor(cursor), filter);
      await answer(req, res, 200, { entries: page.records.map(toAuditView), next_cursor: page.next === null ? null : encodeAuditCursor(page.next) });
    })
    .all(methodNotAllowed('GET'));

  // Unknown paths under /admin, and every error a handler threw, are answered here so that they are recorded too.
  router.use((req, res) => fail(req, res, 'not_found'));
  router.use(async (err: unknown, req: Request, res: Response, _next: NextFunction) => {
    if (res.headersSent) return;
    const code = errorCodeFor(err);
    if (code === 'internal') requestLog(res, logger).error({ err }, 'request failed');
    await fail(req, res, code);
  });

  return router;
}

/** Labels the request for metrics and logs. */
function named(route: string) {
  return (_req: Request, res: Response, next: NextFunction) => {
    res.locals.route = route;
    next();
  };
}

/** No body, an empty body or `{}` (ARCHITECTURE.md); anything else is invalid_body. */
function requireEmptyBody(req: Request, _res: Response, next: NextFunction): void {
  const body: unknown = req.body;
  if (body === undefined || (Buffer.isBuffer(body) && body.toString('utf8').trim() === '')) return next();
  if (!Buffer.isBuffer(body)) return next(new RelayError('invalid_body'));
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return next(new RelayError('invalid_body'));
  }
  const isEmptyObject = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) && Object.keys(parsed).length === 0;
  next(isEmptyObject ? undefined : new RelayError('invalid_body'));
}

/** A JSON body, or undefined when there is none (empty); invalid_body when it is not JSON. */
function optionalJsonBody(req: Request): unknown {
  const body: unknown = req.body;
  if (body === undefined || (Buffer.isBuffer(body) && body.toString('utf8').trim() === '')) return undefined;
  return jsonBody(req);
}

/** The body of a channel rules PUT: JSON (the document itself is judged by parseChannelRules), else invalid_body. */
function jsonBody(req: Request): unknown {
  const body: unknown = req.body;
  if (!Buffer.isBuffer(body)) throw new RelayError('invalid_body');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new RelayError('invalid_body');
  }
}

/** The answer of a deletion, the same on every repeat but for `purged` (what this call removed). */
function deletionView(d: TenantDeletion): Record<string, unknown> {
  return { tenant_id: d.tenantId, deleted: true, deleted_at: d.deletedAt.toISOString(), usage_kept: d.usageKept, purged: d.purged };
}

/** `{tenant_id, version, rules}`: the canonical document. */
function channelRulesView(r: TenantChannelRules): Record<string, unknown> {
  return { tenant_id: r.tenantId, version: r.version, rules: channelRulesJson(r.rules) };
}

/** Like answerChange: 200 with the committed rules only once every consumer applied them, else 503 with them. */
function answerRulesChange(answer: Answer, req: Request, res: Response, rules: TenantChannelRules, p: PropagationResult): Promise<void> {
  const view = channelRulesView(rules);
  if (p.confirmed) return answer(req, res, 200, view);
  return notPropagated(answer, req, res, { channel_rules: view, pending_consumers: pendingView(p) });
}

/** 503 change_not_propagated, with what was committed (`extra`) beside the code: the change is not confirmed in force everywhere. */
function notPropagated(answer: Answer, req: Request, res: Response, extra: Record<string, unknown>): Promise<void> {
  return answer(req, res, httpStatusFor('change_not_propagated'), errorBody('change_not_propagated', extra), { 'retry-after': '1' }, 'change_not_propagated');
}

function pendingView(p: PropagationResult): Array<Record<string, unknown>> {
  return p.pending.map((c) => ({ consumer_id: c.consumerId, kind: c.kind, applied_seq: c.appliedSeq }));
}

/**
 * The committed view. A change not confirmed in force everywhere within the
 * bound answers 503 change_not_propagated with that same view (and a new
 * host-sync secret, which is shown only here) and the consumers still behind.
 */
function answerChange(answer: Answer, req: Request, res: Response, status: number, change: AdminOutcome): Promise<void> {
  const view: Record<string, unknown> = { ...toTenantView(change.tenant) };
  if (change.hostSyncSecret !== undefined) view.host_sync_client_secret = change.hostSyncSecret;
  const p = change.propagation;
  if (p && !p.confirmed) {
    return notPropagated(answer, req, res, { tenant: view, pending_consumers: pendingView(p) });
  }
  return answer(req, res, status, view);
}
