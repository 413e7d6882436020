import { join, resolve } from 'node:path';
import { DEFAULT_PORTS, EnvReader, readOpsListener, readUsageConfig, type UsageConfig, readRedisSettings, readTenantFeedConfig, readTracingConfig, requireRedisWhenAlone, type Env, type RedisSettings, type TenantFeedConfig, type TracingConfig } from '@service-relay/core';
import { readConnectionLimits, type ConnectionLimits } from '@service-relay/edge';
import type { TenantLimits } from '@service-relay/tenant-events';

export interface RealtimeConfig {
  port: number;
  /** REALTIME_HOST (else BIND_HOST, else 127.0.0.1). */
  host: string;
  /** REALTIME_OPS_PORT (9081): /healthz, /readyz and /metrics; the public port serves /healthz only. */
  opsPort: number;
  /** REALTIME_OPS_HOST (else BIND_HOST, else 127.0.0.1). */
  opsHost: string;
  connectionLimits: ConnectionLimits;
  verifierAddr: string;
  /** The registry's gRPC address and the lease of the tenant feed. */
  tenantFeed: TenantFeedConfig;
  internalToken: string;
  /** INTERNAL_TOKEN and INTERNAL_TOKEN_NEXT while it is set: what this service accepts from callers. */
  acceptedInternalTokens: readonly string[];
  redis: RedisSettings;
  /** REDIS_PUBSUB: how live messages cross instances (docs/OPERATIONS.md "Sharded pub/sub"). */
  redisPubsub: 'auto' | 'plain' | 'both';
  verifyDeadlineMs: number;
  historyMaxMessages: number;
  historyTtlS: number;
  /** The embedded store's journal (without REDIS_URL). */
  historyDir: string;
  idempotencyWindowS: number;
  maxSubscriptions: number;
  /** docs/API.md "Limits": publish frames per second per connection (token bucket rate) and its burst. */
  publishRatePerS: number;
  publishBurst: number;
  /** `auth` frames per minute per connection. */
  authFramesPerMinute: number;
  /** Open WebSocket connections per tenant across every realtime instance sharing REDIS_URL. */
  maxConnectionsPerTenant: number;
  /** #30: the tenant publish rate's defaults (cluster-wide, REST + WebSocket + host API) and how often instances reconcile it. */
  tenantPublishRatePerS: number;
  tenantPublishBurst: number;
  tenantRateSyncMs: number;
  /** #30: members of one presence channel, and the largest message `data` (at most the contract's 64 KiB). */
  maxPresenceMembers: number;
  maxMessageBytes: number;
  maxFrameBytes: number;
  maxBufferedBytes: number;
  /** Presence: an instance silent this long is dead and its members are removed (within this + a third of it). */
  presenceTtlMs: number;
  /** OTEL_EXPORTER_OTLP_ENDPOINT and the sampler; off without an endpoint. */
  tracing: TracingConfig;
  logLevel: string;
  /** Usage metering (#30, docs/OPERATIONS.md "Usage metering"). */
  usage: UsageConfig;
  /** WEBHOOK_EVENTS: detect and record the webhook events (#32; off on Redis Cluster whatever it says). */
  webhookEvents: boolean;
  /** Subscribe/publish callbacks (#32 item 4; docs/OPERATIONS.md "Callbacks"). */
  callbacks: CallbacksConfig;
}

export interface CallbacksConfig {
  /** CALLBACK_ALLOW_HTTP: plain http callback URLs beyond loopback. */
  allowHttp: boolean;
  /** CALLBACK_CACHE_MAX_TTL_S: the longest a host's answer is reused, whatever ttl_s it asks for (0: never). */
  maxTtlS: number;
  /** CALLBACK_CACHE_MAX_ENTRIES: answers kept (least recently used go first). */
  maxEntries: number;
  /** CALLBACK_CONNECTIONS_PER_HOST: keep-alive sockets per host origin. */
  connectionsPerHost: number;
}

/** Reads every variable realtime uses (ARCHITECTURE.md "Configuration decisions"); a bad one throws ConfigError. */
export function loadConfig(env: Env, opts: { standalone: boolean }): Readonly<RealtimeConfig> {
  const r = new EnvReader(env);
  const redis = readRedisSettings(r);
  requireRedisWhenAlone(redis, opts.standalone);
  const port = r.port('REALTIME_PORT', DEFAULT_PORTS.REALTIME_PORT);
  return Object.freeze({
    port,
    host: r.bindHost('REALTIME_HOST'),
    ...readOpsListener(r, 'REALTIME', 'REALTIME_PORT', port),
    connectionLimits: Object.freeze(realtimeConnectionLimits(r, env, opts.standalone)),
    verifierAddr: r.address('VERIFIER_ADDR', `127.0.0.1:${DEFAULT_PORTS.VERIFIER_GRPC_PORT}`),
    tenantFeed: Object.freeze(readTenantFeedConfig(r)),
    ...r.internalTokens(),
    redis: Object.freeze(redis),
    redisPubsub: r.oneOf('REDIS_PUBSUB', ['auto', 'plain', 'both'] as const, 'auto'),
    verifyDeadlineMs: r.int('VERIFY_DEADLINE_MS', 2000, 10, 60_000),
    historyMaxMessages: r.int('HISTORY_MAX_MESSAGES', 1000, 1, 10_000_000),
    historyTtlS: r.int('HISTORY_TTL_S', 86_400, 1, 365 * 86_400),
    historyDir: resolve(r.string('HISTORY_DIR', join(r.string('DATA_DIR', './.data'), 'history'))),
    idempotencyWindowS: r.int('IDEMPOTENCY_WINDOW_S', 600, 1, 7 * 86_400),
    maxSubscriptions: r.int('MAX_SUBSCRIPTIONS', 100, 1, 100_000),
    publishRatePerS: r.int('PUBLISH_RATE_PER_S', 100, 1, 1_000_000),
    publishBurst: r.int('PUBLISH_BURST', 1000, 1, 1_000_000),
    authFramesPerMinute: r.int('AUTH_FRAMES_PER_MINUTE', 10, 1, 10_000),
    maxConnectionsPerTenant: r.int('MAX_CONNECTIONS_PER_TENANT', 10_000, 1, 10_000_000),
    tenantPublishRatePerS: r.int('TENANT_PUBLISH_RATE_PER_S', 10_000, 1, 1_000_000),
    tenantPublishBurst: r.int('TENANT_PUBLISH_BURST', 20_000, 1, 1_000_000),
    tenantRateSyncMs: r.int('TENANT_RATE_SYNC_MS', 100, 10, 10_000),
    maxPresenceMembers: r.int('MAX_PRESENCE_MEMBERS', 10_000, 1, 1_000_000),
    maxMessageBytes: r.int('MAX_MESSAGE_BYTES', 65_536, 1, 65_536),
    // The data limit is 64 KiB; a frame must be able to carry that plus its envelope.
    maxFrameBytes: r.int('MAX_FRAME_BYTES', 131_072, 70_000, 64 * 1024 * 1024),
    maxBufferedBytes: r.int('MAX_BUFFERED_BYTES', 4_194_304, 65_536, 1024 * 1024 * 1024),
    presenceTtlMs: r.int('PRESENCE_TTL_MS', 10_000, 300, 600_000),
    tracing: Object.freeze(readTracingConfig(r)),
    logLevel: r.logLevel(),
    usage: readUsageConfig(r),
    callbacks: Object.freeze({
      allowHttp: r.bool('CALLBACK_ALLOW_HTTP', false),
      maxTtlS: r.int('CALLBACK_CACHE_MAX_TTL_S', 60, 0, 86_400),
      maxEntries: r.int('CALLBACK_CACHE_MAX_ENTRIES', 100_000, 1, 10_000_000),
      connectionsPerHost: r.int('CALLBACK_CONNECTIONS_PER_HOST', 64, 1, 10_000),
    }),
    webhookEvents: r.bool('WEBHOOK_EVENTS', true),
  });
}

/**
 * In the embedded default (one process) realtime sits behind the gateway,
 * whose proxied WebSockets all come from one loopback address: unless the
 * operator set MAX_CONNECTIONS_PER_ADDRESS, the gateway limits per client
 * and realtime only caps the total. Alone, realtime applies both as set.
 */
function realtimeConnectionLimits(r: EnvReader, env: Env, standalone: boolean): ConnectionLimits {
  const limits = readConnectionLimits(r);
  if (standalone || env.MAX_CONNECTIONS_PER_ADDRESS !== undefined) return limits;
  return { ...limits, maxPerAddress: limits.maxConnections };
}

/** The environment's limits: what a tenant has where neither its plan nor its overrides say (#30). */
export function defaultLimits(c: Readonly<RealtimeConfig>): TenantLimits {
  return Object.freeze({
    max_connections: c.maxConnectionsPerTenant,
    publish_rate_per_s: c.tenantPublishRatePerS,
    publish_burst: c.tenantPublishBurst,
    connection_publish_rate_per_s: c.publishRatePerS,
    connection_publish_burst: c.publishBurst,
    max_subscriptions: c.maxSubscriptions,
    max_presence_members: c.maxPresenceMembers,
    history_max_messages: c.historyMaxMessages,
    history_ttl_s: c.historyTtlS,
    max_message_bytes: c.maxMessageBytes,
  });
}
