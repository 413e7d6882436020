import type * as grpc from '@grpc/grpc-js';
import { isCanonicalUuid, type Logger } from '@service-relay/core';
import { callbackSettingsJson, channelRulesJson } from '@service-relay/channels';
import {
  grpcError,
  hasInternalToken,
  REGISTRY_FEED_PROTO,
  REGISTRY_FEED_SERVICE,
  serviceDefinition,
  type ChangesSinceRequest,
  type ChangesSinceResponse,
  type ChannelRulesRequest,
  type ChannelRulesResponse,
  type TenantLimitsResponse,
  type TenantCallbacksResponse,
  type TenantWebhooksResponse,
} from '@service-relay/grpc';
import type { CallbacksStore } from '../store/callbacks-store';
import type { WebhookStore } from '../store/webhook-store';
import type { LimitsStore } from '../store/limits-store';
import type { RegistryMetrics } from '../metrics';
import type { ChannelRulesStore } from '../store/channel-rules-store';
import type { FeedAnswers } from '../feed-mirror/feed-answers';

const CONSUMER_ID = /^[A-Za-z0-9_.:-]{1,200}$/;
const CONSUMER_KIND = /^[a-z-]{1,40}$/;
const MAX_LEASE_MS = 600_000;

/**
 * relay.registry.v1.TenantFeed: consumers report how far they applied and get
 * what came after. The report is recorded before the changes are read, so a
 * consumer whose answer holds no change was current as of its own request
 * (FeedAnswers: from PostgreSQL, or from the feed mirror while it is unreachable).
 * ChannelRules answers a tenant's current rules with the feed sequence they
 * reflect (realtime asks on a tenant's first request).
 */
export function addFeedService(
  server: grpc.Server,
  feed: FeedAnswers,
  rules: ChannelRulesStore,
  acceptedTokens: string | readonly string[],
  metrics: RegistryMetrics,
  logger: Logger,
  /** TenantLimits (#30); absent, it answers unavailable (realtime then applies its defaults). */
  limits?: LimitsStore,
  /** TenantCallbacks (#32); absent, it answers unavailable (realtime then refuses what would ask the host). */
  callbacks?: CallbacksStore,
  /** TenantWebhooks (#32); absent, it answers unavailable (realtime then records every event of the tenant). */
  webhooks?: WebhookStore,
): void {
  /**
   * A unary call answering one tenant's snapshot of a store (limits, callbacks, webhook interest):
   * internal callers only; `found: false` for an unknown tenant; unavailable without the store or
   * when it fails (the consumer fails closed on that, never reading it as "nothing set").
   */
  const tenantSnapshot = <S, Res>(name: string, load: ((tenantId: string) => Promise<S | undefined>) | undefined, found: (s: S) => Res, notFound: Res) =>
    (call: grpc.ServerUnaryCall<{ tenant_id: string }, Res>, callback: grpc.sendUnaryData<Res>) => {
      if (!hasInternalToken(call.metadata, acceptedTokens)) {
        metrics.rulesCall('unauthenticated');
        callback(grpcError('invalid_internal_token'));
        return;
      }
      const tenantId = call.request.tenant_id;
      if (!load) return callback(grpcError('unavailable'));
      load(tenantId).then(
        (s) => callback(null, s ? found(s) : notFound),
        (err: unknown) => {
          logger.warn({ err: (err as Error).message, tenant_id: isCanonicalUuid(tenantId) ? tenantId : undefined }, `${name} failed`);
          callback(grpcError('unavailable'));
        },
      );
    };
  server.addService(serviceDefinition(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE), {
    ChangesSince: (call: grpc.ServerUnaryCall<ChangesSinceRequest, ChangesSinceResponse>, callback: grpc.sendUnaryData<ChangesSinceResponse>) => {
      if (!hasInternalToken(call.metadata, acceptedTokens)) {
        metrics.feedCall('unauthenticated');
        callback(grpcError('invalid_internal_token'));
        return;
      }
      const r = call.request;
      const applied = Number(r.applied_seq);
      const leaseMs = Number(r.lease_ms);
      if (!CONSUMER_ID.test(r.consumer_id) || !CONSUMER_KIND.test(r.consumer_kind) || !Number.isSafeInteger(applied) || applied < -1 || !(leaseMs > 0 && leaseMs <= MAX_LEASE_MS)) {
        metrics.feedCall('invalid');
        callback(grpcError('invalid_body', 'malformed ChangesSince request'));
        return;
      }
      feed.changesSince(r.consumer_id, r.consumer_kind, applied, leaseMs, Number(r.limit) || 100).then(
        (page) => {
          metrics.feedCall(page.source === 'mirror' ? (page.reset ? 'mirror_reset' : 'mirror') : page.reset ? 'reset' : 'ok');
          callback(null, {
            latest_seq: page.latestSeq,
            reset: page.reset,
            changes: page.changes.map((c) => ({
              seq: c.seq,
              tenant_id: c.tenantId,
              kind: c.kind,
              version: c.version,
              revoked_key_versions: c.revokedKeyVersions,
              detail_json: c.detail === undefined ? '' : JSON.stringify(c.detail),
            })),
          });
        },
        (err: unknown) => {
          metrics.feedCall('error');
          logger.warn({ err: (err as Error).message }, 'ChangesSince failed');
          callback(grpcError('unavailable'));
        },
      );
    },
    ChannelRules: (call: grpc.ServerUnaryCall<ChannelRulesRequest, ChannelRulesResponse>, callback: grpc.sendUnaryData<ChannelRulesResponse>) => {
      if (!hasInternalToken(call.metadata, acceptedTokens)) {
        metrics.rulesCall('unauthenticated');
        callback(grpcError('invalid_internal_token'));
        return;
      }
      const tenantId = call.request.tenant_id;
      rules.snapshot(tenantId).then(
        (s) => {
          metrics.rulesCall(s ? 'found' : 'not_found');
          callback(null, s ? { found: true, rules_json: JSON.stringify(channelRulesJson(s.rules)), version: s.version, as_of_seq: s.asOfSeq } : { found: false, rules_json: '', version: 0, as_of_seq: 0 });
        },
        (err: unknown) => {
          metrics.rulesCall('error');
          logger.warn({ err: (err as Error).message, tenant_id: isCanonicalUuid(tenantId) ? tenantId : undefined }, 'ChannelRules failed');
          // Realtime fails closed on this; it must not read as "default rules".
          callback(grpcError('unavailable'));
        },
      );
    },
    TenantLimits: tenantSnapshot('TenantLimits', limits && ((id) => limits.snapshot(id)), (s) => ({ found: true, limits_json: JSON.stringify(s.limits), limits_version: s.version, as_of_seq: s.asOfSeq }), {
      found: false, limits_json: '', limits_version: 0, as_of_seq: 0,
    } satisfies TenantLimitsResponse),
    TenantCallbacks: tenantSnapshot(
      'TenantCallbacks',
      callbacks && ((id) => callbacks.snapshot(id)),
      (s) => ({ found: true, settings_json: s.settings ? JSON.stringify(callbackSettingsJson(s.settings)) : '', secrets: s.secrets, version: s.version, as_of_seq: s.asOfSeq }),
      { found: false, settings_json: '', secrets: [], version: 0, as_of_seq: 0 } satisfies TenantCallbacksResponse,
    ),
    TenantWebhooks: tenantSnapshot('TenantWebhooks', webhooks && ((id) => webhooks.interest(id)), (s) => ({ found: true, events: s.events, version: s.version, as_of_seq: s.asOfSeq }), {
      found: false, events: [], version: 0, as_of_seq: 0,
    } satisfies TenantWebhooksResponse),
  });
}
