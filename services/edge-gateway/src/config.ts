import { ConfigError, DEFAULT_PORTS, EnvReader, readOpsListener, readRedisSettings, readTenantFeedConfig, readTracingConfig, requireRedisWhenAlone, type Env, type RedisSettings, type TenantFeedConfig, type TracingConfig, readUsageConfig, type UsageConfig } from '@service-relay/core';
import { readConnectionLimits, type ConnectionLimits } from '@service-relay/edge';

export interface GatewayConfig {
  port: number;
  /** GATEWAY_HOST (else BIND_HOST, else 127.0.0.1). */
  host: string;
  /** GATEWAY_OPS_PORT (9080): /healthz, /readyz and /metrics; the public port serves /healthz only. */
  opsPort: number;
  /** GATEWAY_OPS_HOST (else BIND_HOST, else 127.0.0.1). */
  opsHost: string;
  connectionLimits: ConnectionLimits;
  /** Requests with more header fields than this are refused with 431 (MAX_REQUEST_HEADERS). */
  maxRequestHeaders: number;
  verifierAddr: string;
  /** REGISTRY_URL: one or more registry base URLs (replicas), comma-separated; host-sync calls take them in turn. */
  registryUrls: readonly string[];
  /** The first of registryUrls. */
  registryUrl: string;
  /** The registry's gRPC address and the lease of the tenant feed. */
  tenantFeed: TenantFeedConfig;
  /** REALTIME_URL: one or more realtime base URLs, comma-separated; requests and upgrades take them in turn. */
  realtimeUrls: readonly string[];
  /** The first of realtimeUrls. */
  realtimeUrl: string;
  internalToken: string;
  /** INTERNAL_TOKEN and INTERNAL_TOKEN_NEXT while it is set: what this service accepts from callers. */
  acceptedInternalTokens: readonly string[];
  redis: RedisSettings;
  /** Allowed browser origins; `'*'` allows any. Empty: no CORS headers at all. */
  corsOrigins: readonly string[] | '*';
  upstreamTimeoutMs: number;
  verifyDeadlineMs: number;
  /** 0 turns the verification cache off (every request asks the verifier). */
  authCacheTtlS: number;
  /** Take the client address from X-Forwarded-For (last hop) instead of the socket. */
  trustProxy: boolean;
  /** Overload protection (docs/OPERATIONS.md "Overload"). */
  overload: OverloadConfig;
  /** OTEL_EXPORTER_OTLP_ENDPOINT and the sampler; off without an endpoint. */
  tracing: TracingConfig;
  logLevel: string;
  /** Usage metering (#30): the gateway counts the refusals it makes for a known tenant. */
  usage: UsageConfig;
}

export interface OverloadConfig {
  /** REFUSED_AUTH_RATE_LIMIT: refused credentials per client address a minute (sustained) before the gateway answers 429 itself. */
  refusedPerAddressPerMinute: number;
  /** REFUSED_AUTH_BURST: how many refused credentials an address may cause at once. */
  refusedBurst: number;
  /** REFUSED_AUTH_HOLD_MS: after the gateway's own 429 (or the unproven lane's 503), how long at most the connection is not read from; 0 = off. */
  refusedHoldMs: number;
  /** UNPROVEN_AUTH_IN_FLIGHT: verifier and registry calls at once for credentials of tenants not served here recently. */
  unprovenInFlight: number;
  /** UNPROVEN_AUTH_QUEUE: how many more such requests may wait for a turn; past it they get 503. */
  unprovenQueue: number;
  /** MAX_REQUESTS_IN_FLIGHT: requests being answered at once; past it new ones get 503. */
  maxInFlight: number;
  /** SHED_EVENT_LOOP_DELAY_MS: event-loop delay (p99 of the last 250 ms) past which new requests get 503; 0 = off. */
  maxEventLoopDelayMs: number;
}

export interface LoadOptions {
  /** Started alone (not by the all-in-one launcher): REDIS_URL is then required. */
  standalone?: boolean;
}

/**
 * Reads the gateway's configuration once. There is deliberately no switch
 * that turns authentication off: only tests and the bench build an app
 * without it, through createApp().
 */
export function loadConfig(env: Env, opts: LoadOptions = {}): GatewayConfig {
  const r = new EnvReader(env);
  const redis = readRedisSettings(r);
  requireRedisWhenAlone(redis, opts.standalone ?? false);
  const realtimeUrls = r.urlList('REALTIME_URL', `http://127.0.0.1:${DEFAULT_PORTS.REALTIME_PORT}`);
  const registryUrls = r.urlList('REGISTRY_URL', `http://127.0.0.1:${DEFAULT_PORTS.REGISTRY_HTTP_PORT}`);
  const port = r.port('GATEWAY_PORT', DEFAULT_PORTS.GATEWAY_PORT);
  const config: GatewayConfig = {
    port,
    host: r.bindHost('GATEWAY_HOST'),
    ...readOpsListener(r, 'GATEWAY', 'GATEWAY_PORT', port),
    connectionLimits: Object.freeze(readConnectionLimits(r)),
    maxRequestHeaders: r.int('MAX_REQUEST_HEADERS', 100, 10, 1000),
    verifierAddr: r.address('VERIFIER_ADDR', `127.0.0.1:${DEFAULT_PORTS.VERIFIER_GRPC_PORT}`),
    tenantFeed: Object.freeze(readTenantFeedConfig(r)),
    registryUrls,
    registryUrl: registryUrls[0]!,
    realtimeUrls,
    realtimeUrl: realtimeUrls[0]!,
    ...r.internalTokens(),
    redis,
    corsOrigins: parseOrigins(r.optional('CORS_ORIGINS')),
    upstreamTimeoutMs: r.int('UPSTREAM_TIMEOUT_MS', 10_000, 100, 600_000),
    verifyDeadlineMs: r.int('VERIFY_DEADLINE_MS', 2000, 10, 60_000),
    authCacheTtlS: r.int('AUTH_CACHE_TTL_S', 30, 0, 3600),
    trustProxy: r.bool('TRUST_PROXY', false),
    overload: Object.freeze({
      refusedPerAddressPerMinute: r.int('REFUSED_AUTH_RATE_LIMIT', 60, 1, 1_000_000),
      refusedBurst: r.int('REFUSED_AUTH_BURST', 20, 1, 1_000_000),
      refusedHoldMs: r.int('REFUSED_AUTH_HOLD_MS', 5000, 0, 60_000),
      unprovenInFlight: r.int('UNPROVEN_AUTH_IN_FLIGHT', 4, 1, 100_000),
      unprovenQueue: r.int('UNPROVEN_AUTH_QUEUE', 1024, 0, 1_000_000),
      maxInFlight: r.int('MAX_REQUESTS_IN_FLIGHT', 2000, 1, 1_000_000),
      maxEventLoopDelayMs: readDelay(r),
    }),
    tracing: Object.freeze(readTracingConfig(r)),
    logLevel: r.logLevel(),
    usage: readUsageConfig(r),
  };
  return Object.freeze(config);
}

/** 0 turns the check off; otherwise at least 10 ms (the monitor's resolution). */
function readDelay(r: EnvReader): number {
  const v = r.int('SHED_EVENT_LOOP_DELAY_MS', 500, 0, 60_000);
  if (v > 0 && v < 10) throw new ConfigError('SHED_EVENT_LOOP_DELAY_MS', `must be 0 (off) or between 10 and 60000, got ${v}`);
  return v;
}

function parseOrigins(raw: string | undefined): readonly string[] | '*' {
  if (raw === undefined) return Object.freeze([]);
  const items = raw.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (items.includes('*')) return '*';
  for (const origin of items) {
    let u: URL;
    try {
      u = new URL(origin);
    } catch {
      throw new ConfigError('CORS_ORIGINS', `has an invalid origin ${JSON.stringify(origin)}`);
    }
    // Browsers send the bare origin (scheme://host[:port]); anything longer could never match.
    if (u.origin !== origin) throw new ConfigError('CORS_ORIGINS', `entries must be bare origins like https://app.example.com, got ${JSON.stringify(origin)}`);
  }
  return Object.freeze(items);
}
