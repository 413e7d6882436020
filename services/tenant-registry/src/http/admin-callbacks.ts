import type { Request, Response, Router } from 'express';
import { errorBody, RelayError, type ErrorCode } from '@service-relay/core';
import { jsonBody, tenantIdParam } from './admin-params';
import { callbacksView, type CallbacksAdmin, type CallbacksOperation, type CallbacksOutcome } from '../tenants/callbacks-admin';
import type { PropagationResult } from '../tenants/propagation';

type Answer = (req: Request, res: Response, status: number, body: unknown, headers?: Record<string, string>, error?: ErrorCode) => Promise<void>;
type Middleware = (req: Request, res: Response, next: (err?: unknown) => void) => void;

export interface CallbacksRoutesDeps {
  callbacks: CallbacksAdmin;
  answer: Answer;
  notPropagated(req: Request, res: Response, extra: Record<string, unknown>, p: PropagationResult): Promise<void>;
  named(route: string): Middleware;
  body: Middleware;
  emptyBody: Middleware;
  methodNotAllowed(allow: string): (req: Request, res: Response) => Promise<void>;
}

/** `/admin/tenants/{id}/callbacks[/secret/rotate|expire_previous]` (#32 item 4; docs/API.md "Callbacks"). */
export function callbacksRoutes(router: Router, deps: CallbacksRoutesDeps): void {
  const { callbacks, answer } = deps;
  const inForce = (req: Request, res: Response, out: CallbacksOutcome | undefined) => {
    if (!out) throw new RelayError('tenant_not_found');
    const view = callbacksView(out);
    return out.propagation.confirmed ? answer(req, res, 200, view) : deps.notPropagated(req, res, { callbacks: view }, out.propagation);
  };
  router
    .route('/tenants/:id/callbacks')
    .get(deps.named('get_callbacks'), async (req, res) => {
      const c = await callbacks.get(tenantIdParam(req));
      if (!c) throw new RelayError('tenant_not_found');
      await answer(req, res, 200, callbacksView({ callbacks: c }));
    })
    .put(deps.named('set_callbacks'), deps.body, async (req, res) => {
      const tenantId = tenantIdParam(req);
      const settings = callbacks.parse(jsonBody(req));
      if (typeof settings === 'string') return answer(req, res, 400, errorBody('invalid_callbacks', { problem: settings }), {}, 'invalid_callbacks');
      await inForce(req, res, await callbacks.set(tenantId, settings));
    })
    .delete(deps.named('remove_callbacks'), deps.emptyBody, async (req, res) => {
      await inForce(req, res, await callbacks.remove(tenantIdParam(req)));
    })
    .all(deps.methodNotAllowed('GET, PUT, DELETE'));

  const secretRoute = (path: string, op: CallbacksOperation) =>
    router
      .route(`/tenants/:id/callbacks/secret/${path}`)
      .post(deps.named(`callbacks_${op}`), deps.emptyBody, async (req, res) => {
        const out = await callbacks.secret(tenantIdParam(req), op);
        if (out === 'none') return answer(req, res, 404, errorBody('not_found', { problem: 'the tenant has no callbacks' }), {}, 'not_found');
        await inForce(req, res, out);
      })
      .all(deps.methodNotAllowed('POST'));
  secretRoute('rotate', 'rotate_secret');
  secretRoute('expire_previous', 'expire_previous');
}
