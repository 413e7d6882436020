import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { httpStatusFor, isCanonicalUuid, RelayError, safeEqual, sendJson } from '@service-relay/core';
import type { RegistryMetrics } from '../metrics';
import type { AdminOutcome, TenantAction, TenantAdmin } from '../tenants/tenant-admin';
import { toTenantView } from '../tenants/tenant';
import { decodeCursor, encodeCursor, parseLimit } from './list-cursor';
import { NO_STORE, sendError, sendMethodNotAllowed } from './send';

const BEARER = /^Bearer +(\S+) *$/i;

/** POST paths under /admin/tenants/{id}/ and what they do. */
const ACTIONS: ReadonlyArray<readonly [string, TenantAction]> = [
  ['disable', 'disable'],
  ['enable', 'enable'],
  ['jwt_secret/rotate', 'rotate'],
  ['jwt_secret/expire_previous', 'expire_previous'],
  ['jwt_secret/revoke_all', 'revoke_all'],
  ['host_sync/rotate', 'rotate_host_sync'],
];

// Admin calls take no body; a small limit keeps junk cheap to refuse.
const rawBody = express.raw({ type: () => true, limit: 1024 });

/** The admin API of CONTRACT.md, mounted at /admin. */
export function adminRouter(admin: TenantAdmin, adminToken: string, metrics: RegistryMetrics): Router {
  const router = Router();

  router.use((req, res, next) => {
    res.on('finish', () => metrics.adminRequest((res.locals.route as string | undefined) ?? 'unmatched', res.statusCode));
    const m = BEARER.exec(req.headers.authorization ?? '');
    if (!m || !safeEqual(m[1]!, adminToken)) {
      res.locals.route = 'unauthorized';
      return sendError(res, 'invalid_admin_token', { 'www-authenticate': 'Bearer realm="service-relay"' });
    }
    next();
  });

  router
    .route('/tenants')
    .post(named('create'), rawBody, requireEmptyBody, async (_req, res) => {
      const created = await admin.create();
      send(res, 201, created);
    })
    .get(named('list'), async (req, res) => {
      const limit = parseLimit(req.query.limit);
      const cursor = req.query.cursor;
      if (cursor !== undefined && typeof cursor !== 'string') throw new RelayError('invalid_query');
      const page = await admin.list(limit, cursor === undefined ? undefined : decodeCursor(cursor));
      sendJson(res, 200, { tenants: page.tenants.map(toTenantView), next_cursor: page.next ? encodeCursor(page.next) : null }, NO_STORE);
    })
    .all((_req, res) => sendMethodNotAllowed(res, 'GET, POST'));

  router
    .route('/tenants/:id')
    .get(named('get'), async (req, res) => {
      const tenant = await admin.get(tenantIdParam(req));
      if (!tenant) throw new RelayError('tenant_not_found');
      sendJson(res, 200, toTenantView(tenant), NO_STORE);
    })
    .all((_req, res) => sendMethodNotAllowed(res, 'GET'));

  for (const [path, action] of ACTIONS) {
    router
      .route(`/tenants/:id/${path}`)
      .post(named(action), rawBody, requireEmptyBody, async (req, res) => {
        const change = await admin.apply(tenantIdParam(req), action);
        if (!change) throw new RelayError('tenant_not_found');
        send(res, 200, change);
      })
      .all((_req, res) => sendMethodNotAllowed(res, 'POST'));
  }

  return router;
}

/** Labels the request for metrics and logs. */
function named(route: string) {
  return (_req: Request, res: Response, next: NextFunction) => {
    res.locals.route = route;
    next();
  };
}

function tenantIdParam(req: Request): string {
  const id = req.params.id;
  if (typeof id !== 'string' || !isCanonicalUuid(id)) throw new RelayError('invalid_tenant_id');
  return id;
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

/**
 * The committed view. A change not confirmed in force everywhere within the
 * bound answers 503 change_not_propagated with that same view (and a new
 * host-sync secret, which is shown only here) and the consumers still behind.
 */
function send(res: Response, status: number, change: AdminOutcome): void {
  const view: Record<string, unknown> = { ...toTenantView(change.tenant) };
  if (change.hostSyncSecret !== undefined) view.host_sync_client_secret = change.hostSyncSecret;
  const p = change.propagation;
  if (p && !p.confirmed) {
    res.setHeader('retry-after', '1');
    sendJson(
      res,
      httpStatusFor('change_not_propagated'),
      { errors: ['change_not_propagated'], tenant: view, pending_consumers: p.pending.map((c) => ({ consumer_id: c.consumerId, kind: c.kind, applied_seq: c.appliedSeq })) },
      NO_STORE,
    );
    return;
  }
  sendJson(res, status, view, NO_STORE);
}
