import type { NextFunction, Request, Response } from 'express';
import { errorBody, httpStatusFor, systemClock, type Clock, type ErrorCode, type Logger } from '@service-relay/core';
import { MAX_HOST_ACTION_BODY_BYTES, MAX_META_BODY_BYTES, MAX_PUBLISH_BODY_BYTES, readBodyOrRefuse, requestIdOf, sendError, sendJson } from '@service-relay/edge';
import type { RegistryMetrics } from '../metrics';
import type { RealtimeClient } from '../realtime/realtime-client';
import type { HostSyncCheck } from '../tenants/host-sync-check';
import { isProblem, parseChannel, parsePublishRequest, parseRevokeRequest, parseUserId, type HostProblem } from '../tenants/host-requests';
import type { UserActionOutcome, UserActions } from '../tenants/user-actions';
import { callbacksView, type CallbacksAdmin, type CallbacksOutcome } from '../tenants/callbacks-admin';
import { hostCredentialGate, type HostFetchLimit } from './host-sync-fetch';
import { requestLog } from './request-log';
import { NO_STORE } from './send';
import type { WebhooksAdmin } from '../webhooks/webhooks-admin';
import { webhookCall } from './webhook-routes';

/**
 * The host path, matched on the raw path (never decoded: the tenant segment
 * goes to the credential check as written, like the fetch's).
 */
const HOST_PATH = /^\/api\/host\/tenants\/([^/]*)\/(.+?)\/?$/;

type Route =
  | { name: 'publish'; method: 'POST' }
  | { name: 'presence'; method: 'GET'; channel: string }
  | { name: 'disconnect'; method: 'POST'; user: string }
  | { name: 'revoke_tokens'; method: 'POST'; user: string }
  | { name: 'callbacks'; method: 'GET, PUT, DELETE' }
  | { name: 'callbacks_rotate_secret' | 'callbacks_expire_previous'; method: 'POST' }
  | { name: 'webhooks'; method: '*'; rest: string[] };

function routeOf(rest: string): Route | undefined {
  if (rest === 'messages') return { name: 'publish', method: 'POST' };
  if (rest === 'callbacks') return { name: 'callbacks', method: 'GET, PUT, DELETE' };
  if (rest === 'callbacks/secret/rotate') return { name: 'callbacks_rotate_secret', method: 'POST' };
  if (rest === 'callbacks/secret/expire_previous') return { name: 'callbacks_expire_previous', method: 'POST' };
  if (rest === 'webhooks' || rest.startsWith('webhooks/')) return { name: 'webhooks', method: '*', rest: rest.split('/') };
  let m = /^channels\/([^/]+)\/presence$/.exec(rest);
  if (m) return { name: 'presence', method: 'GET', channel: m[1]! };
  m = /^users\/([^/]+)\/(disconnect|revoke_tokens)$/.exec(rest);
  if (m) return { name: m[2] as 'disconnect' | 'revoke_tokens', method: 'POST', user: m[1]! };
  return undefined;
}

export interface HostApiDeps {
  hostSync: HostSyncCheck;
  users: UserActions;
  realtime: RealtimeClient;
  metrics: RegistryMetrics;
  logger: Logger;
  limit: HostFetchLimit | undefined;
  clock?: Clock;
  /** Subscribe/publish callbacks (#32); absent, those routes answer 404 (as unknown paths). */
  callbacks?: CallbacksAdmin | undefined;
  /** Webhook endpoints (#32); absent, those routes are not served here. */
  webhooks?: WebhooksAdmin;
}

/**
 * The host server API (#13): everything under /api/host/tenants/{id}/ beside
 * the secret fetch. A host authenticates exactly as for the fetch (HTTP
 * Basic with its host-sync credential, the same check, the same failure
 * rate limit, the same 401 bytes); only then is its request read and judged.
 */
export function hostApi(deps: HostApiDeps) {
  const clock = deps.clock ?? systemClock;
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const m = HOST_PATH.exec(req.path);
    const route = m ? routeOf(m[2]!) : undefined;
    if (!m || !route || (route.name.startsWith('callbacks') && !deps.callbacks) || (route.name === 'webhooks' && !deps.webhooks)) return next();
    res.once('finish', () => deps.metrics.hostRequest(route.name, res.statusCode));
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    if (route.method !== '*' && !route.method.split(', ').includes(method)) return sendError(res, 'method_not_allowed', { ...NO_STORE, allow: route.method });
    const tenantId = m[1]!;
    const ok = await hostCredentialGate(req, res, tenantId, async (credentials) => ((await deps.hostSync.authenticate(tenantId, credentials)) ? true : undefined), {
      logger: deps.logger,
      limit: deps.limit,
      count: () => {},
    });
    if (!ok) return;
    // From here the tenant id is the authenticated tenant's canonical id.
    // The id the registry's middleware chose (and answers and logs with), so realtime logs the same one.
    const answered = res.getHeader('x-request-id');
    const requestId = typeof answered === 'string' ? answered : requestIdOf(req.headers['x-request-id']);
    try {
      switch (route.name) {
        case 'publish':
          return await publish(deps, req, res, tenantId, requestId);
        case 'presence':
          return await presence(deps, res, tenantId, route.channel, requestId);
        case 'disconnect':
        case 'revoke_tokens':
          return await userAction(deps, req, res, tenantId, route, clock);
        case 'callbacks':
        case 'callbacks_rotate_secret':
        case 'callbacks_expire_previous':
          return await hostCallbacks(deps.callbacks!, req, res, tenantId, route.name, method);
        case 'webhooks':
          return await webhooks(deps, req, res, tenantId, route.rest);
      }
    } catch (err) {
      next(err);
    }
  };
}

async function publish(deps: HostApiDeps, req: Request, res: Response, tenantId: string, requestId: string): Promise<void> {
  const body = await readJson(req, res, MAX_PUBLISH_BODY_BYTES);
  if (body === NOT_READ) return;
  const parsed = parsePublishRequest(body);
  if (isProblem(parsed)) return refuse(res, parsed);
  const answer = await deps.realtime.publish(tenantId, { channels: parsed.channels, data: parsed.data, ...(parsed.idempotencyKey !== undefined && { idempotency_key: parsed.idempotencyKey }) }, requestId);
  passOn(deps, res, answer);
}

async function presence(deps: HostApiDeps, res: Response, tenantId: string, segment: string, requestId: string): Promise<void> {
  const channel = parseChannel(segment);
  if (isProblem(channel)) return refuse(res, channel);
  passOn(deps, res, await deps.realtime.presence(tenantId, channel, requestId));
}

async function userAction(deps: HostApiDeps, req: Request, res: Response, tenantId: string, route: Route & { user: string }, clock: Clock): Promise<void> {
  const user = parseUserId(route.user);
  if (isProblem(user)) return refuse(res, user);
  const body = await readJson(req, res, MAX_HOST_ACTION_BODY_BYTES);
  if (body === NOT_READ) return;
  let outcome: UserActionOutcome | undefined;
  if (route.name === 'revoke_tokens') {
    const parsed = parseRevokeRequest(body, Math.floor(clock.now() / 1000));
    if (isProblem(parsed)) return refuse(res, parsed);
    outcome = await deps.users.revokeTokens(tenantId, user, parsed.before);
  } else {
    if (body !== undefined && !isEmptyObject(body)) return refuse(res, { code: 'invalid_body', problem: 'disconnect takes no body (an empty body or {})' });
    outcome = await deps.users.disconnect(tenantId, user);
  }
  // The credential check found the tenant a moment ago; it can only be gone if deleted meanwhile.
  if (!outcome) return sendError(res, 'invalid_host_sync_credentials', NO_STORE);
  const view = { user_id: outcome.userId, ...(outcome.before !== undefined && { issued_before: outcome.before }) };
  if (!outcome.propagation.confirmed) {
    return sendJson(res, httpStatusFor('change_not_propagated'), errorBody('change_not_propagated', view), { ...NO_STORE, 'retry-after': '1' });
  }
  sendJson(res, 200, view, NO_STORE);
}

/**
 * The tenant's own callbacks (#32 item 4), the admin API's calls under the
 * host credential: GET, PUT (settings; the first PUT shows the signing
 * secret once), DELETE, and the secret's rotation and expiry.
 */
async function hostCallbacks(callbacks: CallbacksAdmin, req: Request, res: Response, tenantId: string, name: 'callbacks' | 'callbacks_rotate_secret' | 'callbacks_expire_previous', method: string): Promise<void> {
  const body = await readJson(req, res, MAX_META_BODY_BYTES);
  if (body === NOT_READ) return;
  let out: CallbacksOutcome | 'none' | undefined;
  if (method === 'GET' || method === 'DELETE' || name !== 'callbacks') {
    if (body !== undefined && !isEmptyObject(body)) return refuse(res, { code: 'invalid_body', problem: 'this call takes no body (an empty body or {})' });
  }
  if (name !== 'callbacks') out = await callbacks.secret(tenantId, name === 'callbacks_rotate_secret' ? 'rotate_secret' : 'expire_previous');
  else if (method === 'GET') {
    const current = await callbacks.get(tenantId);
    out = current && { callbacks: current, propagation: { confirmed: true, pending: [], waitedMs: 0 } };
  } else if (method === 'DELETE') out = await callbacks.remove(tenantId);
  else {
    const settings = callbacks.parse(body);
    if (typeof settings === 'string') return refuse(res, { code: 'invalid_callbacks', problem: settings });
    out = await callbacks.set(tenantId, settings);
  }
  if (out === 'none') return sendJson(res, 404, errorBody('not_found', { problem: 'the tenant has no callbacks' }), NO_STORE);
  // The credential check found the tenant a moment ago; it can only be gone if deleted meanwhile.
  if (!out) return sendError(res, 'invalid_host_sync_credentials', NO_STORE);
  const view = callbacksView(out);
  if (!out.propagation.confirmed) return sendJson(res, httpStatusFor('change_not_propagated'), errorBody('change_not_propagated', { callbacks: view }), { ...NO_STORE, 'retry-after': '1' });
  sendJson(res, 200, view, NO_STORE);
}

/** The admin API's webhook calls, for the tenant the credential proves (webhook-routes.ts). */
async function webhooks(deps: HostApiDeps, req: Request, res: Response, tenantId: string, rest: string[]): Promise<void> {
  const body = await readJson(req, res, MAX_META_BODY_BYTES);
  if (body === NOT_READ) return;
  const a = await webhookCall(deps.webhooks!, tenantId, req.method, rest, body, req.query);
  if (!a) return sendError(res, 'not_found', NO_STORE);
  sendJson(res, a.status, a.body, { ...NO_STORE, ...(a.allow && { allow: a.allow }), ...(a.notPropagated && { 'retry-after': '1' }) });
}

/** realtime's answer as it is: its contract errors (413, 400, 503) are the host's too. */
function passOn(deps: HostApiDeps, res: Response, answer: { status: number; body: string; headers?: Record<string, string> }): void {
  if (answer.status >= 500 || !isJson(answer.body)) {
    requestLog(res, deps.logger).warn({ status: answer.status }, 'realtime refused a server call');
    return sendError(res, 'unavailable', NO_STORE);
  }
  sendJson(res, answer.status, answer.body, { ...NO_STORE, ...answer.headers });
}

const NOT_READ = Symbol('not read');

/** The JSON body; undefined for an empty one; NOT_READ once answered (413, or 400 for malformed JSON). */
async function readJson(req: Request, res: Response, limit: number): Promise<unknown> {
  const raw = await readBodyOrRefuse(req, res, limit);
  if (raw === undefined) return NOT_READ;
  const text = raw.toString('utf8');
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    refuse(res, { code: 'invalid_body', problem: 'the body is not valid JSON' });
    return NOT_READ;
  }
}

function refuse(res: Response, p: HostProblem): void {
  sendJson(res, httpStatusFor(p.code), errorBody(p.code as ErrorCode, { problem: p.problem }), NO_STORE);
}

function isEmptyObject(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
