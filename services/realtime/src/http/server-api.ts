import type { UsageMeter } from '@service-relay/core';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { codeOf, errorBody, isCanonicalUuid, type ErrorCode, type Logger } from '@service-relay/core';
import { CHANNEL_NAME, decodeChannel } from '@service-relay/channels';
import { internalCaller, MAX_PUBLISH_BODY_BYTES, readBodyOrRefuse, sendError, sendJson } from '@service-relay/edge';
import { messageJson, SERVER_USER_ID, type ChannelRef, type Message } from '../messaging/message';
import type { MessageBus } from '../messaging/message-bus';
import { applyPublishRule } from '../messaging/publish-rule';
import type { RealtimeMetrics } from '../metrics';
import { requestLog } from './request-log';
import { refuseRate } from './rest-api';
import type { TenantLimitsView } from '../limits/tenant-limits-cache';
import type { TenantPublishRate } from '../limits/tenant-publish-rate';
import type { TenantRefusals } from '../limits/refusals';
import { publishLimits } from '../ws/channel-frames';
import { LIMIT_HEADER } from '@service-relay/edge';

/** The internal server API's paths; the gateway forwards only /api/v1/*, so no client reaches them through it. */
export const SERVER_API_PREFIX = '/internal/server/';
const MESSAGES_PATH = '/internal/server/messages';
const PRESENCE_PATH = /^\/internal\/server\/channels\/([^/]+)\/presence$/;
/** The same bound the registry applies (host-requests.ts). */
const MAX_CHANNELS = 100;

/** One member of a channel's presence, as the host API answers it. */
export interface PresenceMember {
  user_id: string;
  data?: unknown;
}

/** Lists who is present on a tenant's channel, cluster-wide (realtime's presence). */
export type PresenceLister = (ref: ChannelRef) => Promise<PresenceMember[]>;

export interface ServerApiOptions {
  /** INTERNAL_TOKEN, and INTERNAL_TOKEN_NEXT during a rotation: what a caller from our own services may present. */
  acceptedInternalTokens: string | readonly string[];
  messages: MessageBus;
  metrics: RealtimeMetrics;
  logger: Logger;
  acceptingPublishes: () => boolean;
  /** realtime's presence listing (presence/presence.ts); absent, the listing answers 503 unavailable. */
  presence?: PresenceLister | undefined;
  /** Usage metering (#30); absent: nothing is counted. */
  usage?: UsageRecorderOf | undefined;
  /** Per-tenant limits (#30): a host publish counts once per channel toward the tenant publish rate. */
  limits?: TenantLimitsView | undefined;
  tenantPublishes?: TenantPublishRate | undefined;
  refusals?: TenantRefusals | undefined;
}

type UsageRecorderOf = Pick<UsageMeter, 'published'>;

/**
 * The host server API's realtime side (#13), called by the registry only: it
 * proves itself with INTERNAL_TOKEN and the server marker `x-relay-server: 1`
 * (which the gateway drops from every client request) and names the tenant
 * in `x-relay-tenant-id`. A server publish has no user (`user_id: null`,
 * `from: "server"`) and no channel rule applies to it: it is the tenant.
 */
export function createServerApiHandler(opts: ServerApiOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const fromPeer = internalCaller(opts.acceptedInternalTokens);
  return (req, res) => {
    handle(opts, fromPeer, req, res).catch((err: unknown) => {
      const code = codeOf(err);
      if (code === 'internal' || code === 'unavailable') requestLog(opts.logger, req).error({ err }, 'server request failed');
      sendError(res, code);
    });
  };
}

async function handle(opts: ServerApiOptions, fromPeer: (req: IncomingMessage) => boolean, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const tenantId = fromPeer(req) ? serverCaller(req) : undefined;
  if (tenantId === undefined) return sendError(res, 'invalid_internal_token');
  const path = (req.url ?? '/').split('?', 1)[0]!;
  if (path === MESSAGES_PATH) {
    if (req.method !== 'POST') return sendError(res, 'method_not_allowed', { allow: 'POST' });
    return publish(opts, req, res, tenantId);
  }
  const m = PRESENCE_PATH.exec(path);
  if (!m) return sendError(res, 'not_found');
  if (req.method !== 'GET') return sendError(res, 'method_not_allowed', { allow: 'GET' });
  const channel = decodeChannel(m[1]!);
  if (channel === undefined) return sendError(res, 'invalid_channel');
  if (!opts.presence) return sendError(res, 'unavailable');
  const members = await opts.presence({ tenantId, channel });
  sendJson(res, 200, { channel, members });
}

/** The tenant of a request (that carries the internal token) with the server marker; undefined for anything else. */
function serverCaller(req: IncomingMessage): string | undefined {
  const h = req.headers;
  if (h['x-relay-server'] !== '1') return undefined;
  const tenantId = h['x-relay-tenant-id'];
  return isCanonicalUuid(tenantId) ? tenantId : undefined;
}

/** The publish rule's `malformed`: what it allows. */
const MALFORMED_PUBLISH = 'data must be JSON nested at most 64 arrays/objects deep, and idempotency_key a string matching ^[A-Za-z0-9_.:-]{1,128}$';

async function publish(opts: ServerApiOptions, req: IncomingMessage, res: ServerResponse, tenantId: string): Promise<void> {
  const raw = await readBodyOrRefuse(req, res, MAX_PUBLISH_BODY_BYTES);
  if (raw === undefined) return;
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    return sendError(res, 'invalid_body');
  }
  if (typeof body !== 'object' || body === null || !('data' in body)) return sendError(res, 'invalid_body');
  const { channels, data, idempotency_key: idempotencyKey } = body as { channels?: unknown; data: unknown; idempotency_key?: unknown };
  if (!Array.isArray(channels) || channels.length < 1 || channels.length > MAX_CHANNELS || new Set(channels).size !== channels.length) return sendError(res, 'invalid_body');
  if (!channels.every((c): c is string => typeof c === 'string' && CHANNEL_NAME.test(c))) return sendError(res, 'invalid_channel');
  const lookup = opts.limits?.load(tenantId);
  const limits = lookup instanceof Promise ? await lookup : lookup;
  if (limits && opts.tenantPublishes) {
    const taking = opts.tenantPublishes.take(tenantId, { ratePerS: limits.publish_rate_per_s, burst: limits.publish_burst }, channels.length);
    const taken = taking instanceof Promise ? await taking : taking;
    if (!taken.ok) return refuseRate(opts, res, tenantId, limits.publish_rate_per_s, taken.retryAfterMs);
  }
  const deps = { messages: opts.messages, acceptingPublishes: opts.acceptingPublishes };
  // In order, one after another: a refusal (size, gate) is the same for every
  // channel and so comes with the first, before anything is stored.
  const published: Message[] = [];
  for (const channel of channels) {
    const verdict = await applyPublishRule(deps, { ref: { tenantId, channel }, userId: SERVER_USER_ID, data, idempotencyKey, ...publishLimits(limits) });
    // Bad input names what is allowed, like every other host API refusal (API.md "Host server API").
    if (!verdict.ok) {
      const refusal = verdict.refusal;
      if (refusal === 'malformed') return sendJson(res, 400, errorBody('invalid_body', { problem: MALFORMED_PUBLISH }));
      if (refusal === 'payload_too_large') {
        opts.refusals?.refused(tenantId, 'payload_size');
        if (limits) return sendError(res, 'payload_too_large', { [LIMIT_HEADER]: String(limits.max_message_bytes) });
      }
      return fail(res, refusal);
    }
    opts.metrics.messagesIn.inc({ source: 'server' });
    opts.usage?.published(tenantId, 'host', verdict.bytes);
    published.push(verdict.message);
  }
  sendJson(res, 201, `{"messages":[${published.map(messageJson).join(',')}]}`);
}

function fail(res: ServerResponse, code: ErrorCode): void {
  sendError(res, code);
}
