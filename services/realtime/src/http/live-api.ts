import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '@service-relay/core';
import { internalCaller, sendError, sendJson } from '@service-relay/edge';
import type { ChannelRef } from '../messaging/message';
import type { TopicHub } from '../topics/topic-hub';
import type { ConnectionRegistry } from '../ws/connection-registry';
import { requestLog } from './request-log';

/** The registry's read of this instance's live state (GET /admin/live, the operator console's Live page). */
export const LIVE_PATH = '/internal/live';
/** Channels listed, and tenants listed, at most. */
export const LIVE_TOP_CHANNELS = 10;
export const LIVE_TOP_TENANTS = 100;

export interface LiveApiOptions {
  /** INTERNAL_TOKEN and, during a rotation, INTERNAL_TOKEN_NEXT. */
  acceptedInternalTokens: string | readonly string[];
  /** This instance's tenant feed consumer id (what the registry's feed currency lists). */
  instanceId: string;
  feedCurrent: () => boolean;
  registry: Pick<ConnectionRegistry, 'size' | 'perTenant'>;
  hub: Pick<TopicHub, 'busiest' | 'size'>;
  /** Cluster-wide presence members of a channel; a failure leaves the count out (null). */
  presenceCount: (ref: ChannelRef) => Promise<number>;
  logger: Logger;
}

/**
 * `GET /internal/live` (INTERNAL_TOKEN only; the gateway forwards only
 * /api/v1/*): this instance's connections in all and per tenant, and its
 * busiest channels by local subscribers with their presence counts. Counts
 * only: no user id, token or message.
 */
export function createLiveHandler(opts: LiveApiOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const fromPeer = internalCaller(opts.acceptedInternalTokens);
  return (req, res) => {
    if (!fromPeer(req)) return sendError(res, 'invalid_internal_token');
    if (req.method !== 'GET') return sendError(res, 'method_not_allowed', { allow: 'GET' });
    snapshot(opts).then(
      (body) => sendJson(res, 200, body, { 'cache-control': 'no-store' }),
      (err: unknown) => {
        requestLog(opts.logger, req).error({ err }, 'live snapshot failed');
        sendError(res, 'internal');
      },
    );
  };
}

async function snapshot(opts: LiveApiOptions): Promise<Record<string, unknown>> {
  const tenants = opts.registry.perTenant();
  const busiest = opts.hub.busiest(LIVE_TOP_CHANNELS);
  const channels = await Promise.all(
    busiest.map(async ({ ref, subscribers }) => ({
      tenant_id: ref.tenantId,
      channel: ref.channel,
      subscribers,
      presence: await opts.presenceCount(ref).catch(() => null),
    })),
  );
  return {
    instance_id: opts.instanceId,
    feed_current: opts.feedCurrent(),
    connections: opts.registry.size,
    channels_open: opts.hub.size,
    tenants: tenants.slice(0, LIVE_TOP_TENANTS).map((t) => ({ tenant_id: t.tenantId, connections: t.connections })),
    channels,
  };
}
