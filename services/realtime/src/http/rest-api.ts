import type { IncomingMessage, ServerResponse } from 'node:http';
import { codeOf, isCanonicalUuid, isUuid, type ErrorCode, type Logger } from '@service-relay/core';
import { capabilityFromJson, decodeChannel, presenceEnabled, type ChannelCapability } from '@service-relay/channels';
import { DATA_LIMIT_HEADERS, internalCaller, LIMIT_HEADER, INVALID_TOKEN_HEADERS, MAX_PUBLISH_BODY_BYTES, readBodyOrRefuse, sendError, sendJson } from '@service-relay/edge';
import { channelAccess } from '../authz/channel-access';
import type { CallbackDecider } from '../callbacks/callback-decider';
import { DEFAULT_RULES_LOOKUP, type ChannelRulesLookup } from '../authz/channel-rules-cache';
import { isMessageId } from '../messaging/message-id';
import { messageJson, type ChannelRef } from '../messaging/message';
import type { HistoryPage, MessageBus } from '../messaging/message-bus';
import { applyPublishRule } from '../messaging/publish-rule';
import { EPOCH_SHAPE } from '../messaging/recovery';
import type { RealtimeMetrics } from '../metrics';
import type { Presence } from '../presence/presence';
import type { UsageMeter } from '@service-relay/core';
import { requestLog } from './request-log';
import type { TenantLimitsView } from '../limits/tenant-limits-cache';
import type { TenantPublishRate } from '../limits/tenant-publish-rate';
import type { TenantRefusals } from '../limits/refusals';
import { publishLimits } from '../ws/channel-frames';
import type { TenantLimits } from '@service-relay/tenant-events';

const MESSAGES_PATH = /^\/api\/v1\/channels\/([^/]+)\/messages$/;
const PRESENCE_PATH = /^\/api\/v1\/channels\/([^/]+)\/presence$/;

export interface RestOptions {
  /** INTERNAL_TOKEN, and INTERNAL_TOKEN_NEXT during a rotation: what a caller from our own services may present. */
  acceptedInternalTokens: string | readonly string[];
  messages: MessageBus;
  metrics: RealtimeMetrics;
  logger: Logger;
  /** False while this instance must not take publishes (503 `unavailable`); default: always true. */
  acceptingPublishes?: () => boolean;
  /** The tenant's channel rules (ChannelRulesCache.lookup); default: the default rules for every tenant. */
  channelRules?: ChannelRulesLookup;
  /** Presence listing (#13 item 3); absent: no channel has presence. */
  presence?: Pick<Presence, 'list'>;
  /** Usage metering (#30); absent: nothing is counted. */
  usage?: UsageMeter;
  /** Per-tenant limits (#30): the tenant publish rate, the largest message, history; absent: the contract's 64 KiB only. */
  limits?: TenantLimitsView;
  tenantPublishes?: TenantPublishRate;
  refusals?: TenantRefusals;
  /** Subscribe/publish callbacks (#32); absent: the host is never asked. */
  callbacks?: CallbackDecider;
}

const ALWAYS = () => true;

interface Caller {
  tenantId: string;
  userId: string;
  expiresAt: number;
  /** The token's `cap` claim (x-relay-cap); undefined when the token has none. */
  cap: ChannelCapability | undefined;
}

/**
 * The tenant REST API behind the gateway. Only the gateway's requests count:
 * it proves itself with INTERNAL_TOKEN and passes the verified identity in
 * x-relay-* headers; anything else is the contract's 401.
 */
export function createRestHandler(opts: RestOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const fromGateway = internalCaller(opts.acceptedInternalTokens);
  return (req, res) => {
    handle(opts, fromGateway, req, res).catch((err: unknown) => {
      const code = codeOf(err);
      if (code === 'internal' || code === 'unavailable') {
        requestLog(opts.logger, req).error({ err }, 'request failed');
      }
      sendError(res, code);
    });
  };
}

/** Every 405 names the methods the path takes (RFC 9110; PROTOCOL.md). */
const ALLOW_READ = { allow: 'GET, HEAD' };
const ALLOW_MESSAGES = { allow: 'GET, HEAD, POST' };

async function handle(opts: RestOptions, fromGateway: (req: IncomingMessage) => boolean, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!path.startsWith('/api/v1/')) return fail(res, 'not_found');
  const caller = fromGateway(req) ? callerOf(req) : undefined;
  if (!caller) return fail(res, 'invalid_or_missing_token');
  if (path === '/api/v1/me') {
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail(res, 'method_not_allowed', ALLOW_READ);
    return sendJson(res, 200, JSON.stringify({ tenant_id: caller.tenantId, user_id: caller.userId, expires_at: caller.expiresAt }));
  }
  const presence = PRESENCE_PATH.exec(path);
  if (presence) return listPresence(opts, req, res, caller, presence[1]!);
  const m = MESSAGES_PATH.exec(path);
  if (!m) return fail(res, 'not_found');
  const channel = decodeChannel(m[1]!);
  if (channel === undefined) return fail(res, 'invalid_channel');
  const ref: ChannelRef = { tenantId: caller.tenantId, channel };
  const action = req.method === 'POST' ? 'publish' : req.method === 'GET' || req.method === 'HEAD' ? 'history' : undefined;
  // Before the body is read: a forbidden channel learns nothing about its body or history.
  if (action !== undefined) {
    // Known rules decide at once; rules that must be asked for and cannot be are `unavailable` (thrown): never allowed.
    const lookup = (opts.channelRules ?? DEFAULT_RULES_LOOKUP)(caller.tenantId);
    const rules = lookup instanceof Promise ? await lookup : lookup;
    if (channelAccess(rules, caller.cap, caller.userId, channel, action) === 'deny') return fail(res, 'forbidden_channel');
    // The host is asked only once the rules and the cap allowed (#32): it narrows, never widens.
    if (action === 'publish' && opts.callbacks) {
      const deciding = opts.callbacks.decide({ tenantId: caller.tenantId, userId: caller.userId, expiresAt: caller.expiresAt, cap: caller.cap }, channel, 'publish', 'rest');
      const verdict = deciding instanceof Promise ? await deciding : deciding;
      if (!verdict.allow) return fail(res, verdict.code);
    }
  }
  if (req.method === 'POST') return publish(opts, req, res, ref, caller);
  if (req.method === 'GET' || req.method === 'HEAD') return history(opts, res, ref, new URLSearchParams(q < 0 ? '' : url.slice(q + 1)));
  return fail(res, 'method_not_allowed', ALLOW_MESSAGES);
}

/** `GET …/presence`: the members of a presence channel across every instance, sorted by user_id. */
async function listPresence(opts: RestOptions, req: IncomingMessage, res: ServerResponse, caller: Caller, segment: string): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') return fail(res, 'method_not_allowed', ALLOW_READ);
  const channel = decodeChannel(segment);
  if (channel === undefined) return fail(res, 'invalid_channel');
  const lookup = (opts.channelRules ?? DEFAULT_RULES_LOOKUP)(caller.tenantId);
  const rules = lookup instanceof Promise ? await lookup : lookup;
  if (channelAccess(rules, caller.cap, caller.userId, channel, 'presence') === 'deny') return fail(res, 'forbidden_channel');
  if (!opts.presence || !presenceEnabled(rules, channel)) return fail(res, 'presence_not_enabled');
  const members = await opts.presence.list({ tenantId: caller.tenantId, channel });
  sendJson(res, 200, JSON.stringify({ channel, members }));
}

/** The identity the gateway vouches for in x-relay-* headers (only read once the request proved it came from the gateway). */
function callerOf(req: IncomingMessage): Caller | undefined {
  const h = req.headers;
  const tenantId = h['x-relay-tenant-id'];
  const userId = h['x-relay-user-id'];
  const expiresAt = h['x-relay-expires-at'];
  if (!isCanonicalUuid(tenantId) || !isUuid(userId) || typeof expiresAt !== 'string' || !/^\d{1,12}$/.test(expiresAt)) return undefined;
  // Absent: no claim. Present but unreadable is a gateway fault: fail closed.
  const capHeader = h['x-relay-cap'];
  let cap: ChannelCapability | undefined;
  if (capHeader !== undefined) {
    cap = typeof capHeader === 'string' ? capabilityFromJson(capHeader) : undefined;
    if (cap === undefined) return undefined;
  }
  return { tenantId, userId, expiresAt: Number(expiresAt), cap };
}

async function publish(opts: RestOptions, req: IncomingMessage, res: ServerResponse, ref: ChannelRef, caller: Caller): Promise<void> {
  const lookup = opts.limits?.load(caller.tenantId);
  const limits: TenantLimits | undefined = lookup instanceof Promise ? await lookup : lookup;
  // The tenant's rate before the body is read: a flood is refused at the least cost.
  if (limits && opts.tenantPublishes) {
    const taking = opts.tenantPublishes.take(caller.tenantId, { ratePerS: limits.publish_rate_per_s, burst: limits.publish_burst });
    const taken = taking instanceof Promise ? await taking : taking;
    if (!taken.ok) return refuseRate(opts, res, caller.tenantId, limits.publish_rate_per_s, taken.retryAfterMs);
  }
  const dataLimitHeaders = limits ? { [LIMIT_HEADER]: String(limits.max_message_bytes) } : DATA_LIMIT_HEADERS;
  // Past the limit the rest is read and dropped (bounded), so the client reads the 413.
  const raw = await readBodyOrRefuse(req, res, MAX_PUBLISH_BODY_BYTES, { refusalHeaders: DATA_LIMIT_HEADERS });
  if (raw === undefined) return;
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    return fail(res, 'invalid_body');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('data' in body)) return fail(res, 'invalid_body');
  const deps = { messages: opts.messages, acceptingPublishes: opts.acceptingPublishes ?? ALWAYS };
  const idempotencyKey = req.headers['idempotency-key'];
  const verdict = await applyPublishRule(deps, { ref, userId: caller.userId, data: (body as { data: unknown }).data, idempotencyKey, ...publishLimits(limits) });
  if (!verdict.ok && verdict.refusal === 'payload_too_large') {
    opts.metrics.limitRefusals.inc({ limit: 'payload_size' });
    opts.refusals?.refused(caller.tenantId, 'payload_size');
    return sendError(res, 'payload_too_large', { ...dataLimitHeaders });
  }
  if (!verdict.ok) return fail(res, verdict.refusal === 'malformed' ? 'invalid_body' : verdict.refusal);
  opts.metrics.messagesIn.inc({ source: 'rest' });
  opts.usage?.published(ref.tenantId, 'rest', verdict.bytes);
  // A retry with a known key gets the first message again, with the same status.
  sendJson(res, 201, messageJson(verdict.message));
}

async function history(opts: RestOptions, res: ServerResponse, ref: ChannelRef, query: URLSearchParams): Promise<void> {
  const after = query.get('after');
  const limitText = query.get('limit');
  const epoch = query.get('epoch');
  if (after !== null && !isMessageId(after)) return fail(res, 'invalid_query');
  if (epoch !== null && !EPOCH_SHAPE.test(epoch)) return fail(res, 'invalid_query');
  if (limitText !== null && !/^\d{1,3}$/.test(limitText)) return fail(res, 'invalid_query');
  const limit = limitText === null ? 50 : Number(limitText);
  if (limit < 1 || limit > 100) return fail(res, 'invalid_query');
  // The tenant's own history TTL judges `too_old` (#30); limits that cannot be fetched leave the store's.
  const lookup = after === null ? undefined : opts.limits?.load(ref.tenantId);
  const ttlS = (lookup instanceof Promise ? await lookup.catch(() => undefined) : lookup)?.history_ttl_s;
  const page = await opts.messages.history(ref, after === null ? { limit } : { after, limit, ...(epoch !== null && { epoch }), ...(ttlS !== undefined && { ttlS }) });
  if (page.recovery) opts.metrics.recovery('rest', page.recovery);
  sendJson(res, 200, historyJson(page));
}

/** `{"messages":[…],"epoch"}`, plus `recovered` (and `reason`) when the query had `after`. */
function historyJson(page: HistoryPage): string {
  const r = page.recovery;
  const recovery = r === undefined ? '' : r.recovered ? ',"recovered":true' : `,"recovered":false,"reason":"${r.reason}"`;
  return `{"messages":[${page.messages.map(messageJson).join(',')}],"epoch":${JSON.stringify(page.epoch)}${recovery}}`;
}

/** `429 rate_limited` + `Retry-After` (s) + `X-Relay-Limit` (the rate per second), counted for the tenant. */
export function refuseRate(opts: { metrics: RealtimeMetrics; refusals?: TenantRefusals | undefined }, res: ServerResponse, tenantId: string, limit: number, retryAfterMs: number): void {
  opts.metrics.limitRefusals.inc({ limit: 'tenant_publish_rate' });
  opts.refusals?.refused(tenantId, 'tenant_publish_rate');
  sendError(res, 'rate_limited', { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))), [LIMIT_HEADER]: String(limit) });
}

function fail(res: ServerResponse, code: ErrorCode, headers: Record<string, string> = {}): void {
  sendError(res, code, code === 'invalid_or_missing_token' ? INVALID_TOKEN_HEADERS : code === 'payload_too_large' ? { ...DATA_LIMIT_HEADERS } : { ...headers });
}
