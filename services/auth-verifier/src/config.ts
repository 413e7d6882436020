import { hkdfSync } from 'node:crypto';
import { DEFAULT_PORTS, EnvReader, Keyring, readRedisSettings, readTenantFeedConfig, readTracingConfig, requireRedisWhenAlone, type Env, type RedisSettings, type TenantFeedConfig, type TracingConfig } from '@service-relay/core';

export interface VerifierConfig {
  grpcPort: number;
  httpPort: number;
  /** VERIFIER_GRPC_HOST / VERIFIER_HTTP_HOST (else BIND_HOST, else 127.0.0.1). */
  grpcHost: string;
  httpHost: string;
  /** host:port of the tenant-registry's KeyService. */
  registryAddr: string;
  tenantFeed: TenantFeedConfig;
  internalToken: string;
  /** INTERNAL_TOKEN and INTERNAL_TOKEN_NEXT while it is set: what this service accepts from callers. */
  acceptedInternalTokens: readonly string[];
  /**
   * AES-256-GCM keys for the shared (Redis) key cache, derived from each key
   * of SECRETS_KEYS / SECRETS_KEY (same ids; the newest seals). Undefined
   * only without REDIS_URL, where no entry ever leaves the process.
   */
  cacheKeys: Keyring | undefined;
  redis: RedisSettings;
  maxTokenLifetimeS: number;
  keyCacheTtlS: number;
  /** OTEL_EXPORTER_OTLP_ENDPOINT and the sampler; off without an endpoint. */
  tracing: TracingConfig;
  logLevel: string;
}

/** HKDF info: a key of its own, so the cache key never equals the registry's at-rest key. */
export const CACHE_KEY_INFO = 'service-relay:verifier-key-cache';

export function deriveCacheKey(secretsKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', secretsKey, Buffer.alloc(0), CACHE_KEY_INFO, 32));
}

export function loadConfig(env: Env, opts: { standalone: boolean }): Readonly<VerifierConfig> {
  const r = new EnvReader(env);
  const redis = readRedisSettings(r);
  requireRedisWhenAlone(redis, opts.standalone);
  // The keyring only protects entries written to Redis; in one process without
  // Redis it is not needed, but a value that is set must still be well formed.
  const tenantFeed = readTenantFeedConfig(r);
  const keys = redis.url !== undefined || r.raw('SECRETS_KEY') !== undefined || r.raw('SECRETS_KEYS') !== undefined ? r.secretsKeyring() : undefined;
  return Object.freeze({
    grpcPort: r.port('VERIFIER_GRPC_PORT', DEFAULT_PORTS.VERIFIER_GRPC_PORT),
    httpPort: r.port('VERIFIER_HTTP_PORT', DEFAULT_PORTS.VERIFIER_HTTP_PORT),
    grpcHost: r.bindHost('VERIFIER_GRPC_HOST'),
    httpHost: r.bindHost('VERIFIER_HTTP_HOST'),
    registryAddr: tenantFeed.registryAddr,
    tenantFeed: Object.freeze(tenantFeed),
    ...r.internalTokens(),
    cacheKeys: keys ? new Keyring(keys).derive(CACHE_KEY_INFO) : undefined,
    redis: Object.freeze({ ...redis }),
    maxTokenLifetimeS: r.int('MAX_TOKEN_LIFETIME_S', 86_400, 1, 31_536_000),
    keyCacheTtlS: r.int('KEY_CACHE_TTL_S', 60, 1, 3_600),
    tracing: Object.freeze(readTracingConfig(r)),
    logLevel: r.logLevel(),
  });
}
