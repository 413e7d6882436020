import { describe, expect, it } from 'vitest';
import { ConfigError } from '@service-relay/core';
import { resolve } from 'node:path';
import { loadConfig } from './config';

const base = { INTERNAL_TOKEN: 'int-9f2KqW7xLm3RbT8vNc5YhJ0dPe4sGa6u' };

describe('loadConfig', () => {
  it('limits per address when alone or when the operator says so, only the total behind the embedded gateway', () => {
    const standalone = { ...base, REDIS_URL: 'redis://127.0.0.1:6379' };
    expect(loadConfig(standalone, { standalone: true }).connectionLimits.maxPerAddress).toBe(1_000);
    expect(loadConfig({ ...base, MAX_CONNECTIONS_PER_ADDRESS: '50' }, { standalone: false }).connectionLimits.maxPerAddress).toBe(50);
    expect(loadConfig({ ...base, MAX_CONNECTIONS: '500' }, { standalone: false }).connectionLimits.maxPerAddress).toBe(500);
  });

  it('reads the ops listener, which must not be the public port', () => {
    expect(loadConfig({ ...base, REALTIME_OPS_PORT: '9200', REALTIME_OPS_HOST: '0.0.0.0' }, { standalone: false })).toMatchObject({ opsPort: 9200, opsHost: '0.0.0.0', host: '127.0.0.1' });
    expect(() => loadConfig({ ...base, REALTIME_PORT: '9081' }, { standalone: false })).toThrow('configuration error: REALTIME_OPS_PORT must differ from REALTIME_PORT (9081)');
  });

  it('applies the documented defaults', () => {
    expect(loadConfig(base, { standalone: false })).toEqual({
      port: 8081,
      host: '127.0.0.1',
      opsPort: 9081,
      opsHost: '127.0.0.1',
      // Embedded: behind the in-process gateway, whose WebSockets all come from one address.
      connectionLimits: { firstByteTimeoutMs: 10_000, maxConnections: 19_000, maxPerAddress: 19_000 },
      verifierAddr: '127.0.0.1:50051',
      tenantFeed: { registryAddr: '127.0.0.1:50052', leaseMs: 2000 },
      internalToken: base.INTERNAL_TOKEN,
      acceptedInternalTokens: [base.INTERNAL_TOKEN],
      webhookEvents: true,
      redis: { url: undefined, prefix: 'relay:' },
      redisPubsub: 'auto',
      verifyDeadlineMs: 2000,
      historyMaxMessages: 1000,
      historyTtlS: 86_400,
      historyDir: resolve('.data/history'),
      idempotencyWindowS: 600,
      maxSubscriptions: 100,
      publishRatePerS: 100,
      publishBurst: 1000,
      authFramesPerMinute: 10,
      maxConnectionsPerTenant: 10_000,
      tenantPublishRatePerS: 10_000,
      tenantPublishBurst: 20_000,
      tenantRateSyncMs: 100,
      maxPresenceMembers: 10_000,
      maxMessageBytes: 65_536,
      maxFrameBytes: 131_072,
      maxBufferedBytes: 4_194_304,
      presenceTtlMs: 10_000,
      tracing: { endpoint: undefined, sampler: 'parentbased_always_on', ratio: 1 },
      logLevel: 'info',
      usage: { enabled: true, flushIntervalMs: 30_000, metricsTenants: [] },
      callbacks: { allowHttp: false, maxTtlS: 60, maxEntries: 100_000, connectionsPerHost: 64 },
    });
  });

  it.each([
    [{ INTERNAL_TOKEN: undefined }, 'INTERNAL_TOKEN'],
    [{ INTERNAL_TOKEN: 'short' }, 'INTERNAL_TOKEN'],
    [{ REALTIME_PORT: 'http' }, 'REALTIME_PORT'],
    [{ VERIFIER_ADDR: 'nohost' }, 'VERIFIER_ADDR'],
    [{ REGISTRY_GRPC_ADDR: 'nohost' }, 'REGISTRY_GRPC_ADDR'],
    [{ TENANT_LEASE_MS: '50' }, 'TENANT_LEASE_MS'],
    [{ MAX_MESSAGE_BYTES: '65537' }, 'MAX_MESSAGE_BYTES'],
    [{ MAX_SUBSCRIPTIONS: '0' }, 'MAX_SUBSCRIPTIONS'],
    [{ MAX_FRAME_BYTES: '1024' }, 'MAX_FRAME_BYTES'],
    [{ CALLBACK_CACHE_MAX_TTL_S: '86401' }, 'CALLBACK_CACHE_MAX_TTL_S'],
    [{ REDIS_URL: 'http://x' }, 'REDIS_URL'],
    [{ IDEMPOTENCY_WINDOW_S: '0' }, 'IDEMPOTENCY_WINDOW_S'],
    [{ PUBLISH_RATE_PER_S: '0' }, 'PUBLISH_RATE_PER_S'],
    [{ PUBLISH_BURST: '1.5' }, 'PUBLISH_BURST'],
    [{ AUTH_FRAMES_PER_MINUTE: '10001' }, 'AUTH_FRAMES_PER_MINUTE'],
    [{ MAX_CONNECTIONS_PER_TENANT: '-1' }, 'MAX_CONNECTIONS_PER_TENANT'],
    [{ USAGE_FLUSH_INTERVAL_S: '0' }, 'USAGE_FLUSH_INTERVAL_S'],
    [{ USAGE_METERING: 'maybe' }, 'USAGE_METERING'],
    [{ USAGE_METRICS_TENANTS: 'not-a-tenant' }, 'USAGE_METRICS_TENANTS'],
    [{ REDIS_PUBSUB: 'sharded' }, 'REDIS_PUBSUB'],
  ])('names the bad variable (%o)', (env, variable) => {
    expect(() => loadConfig({ ...base, ...env }, { standalone: false })).toThrow(expect.objectContaining({ variable }) as ConfigError);
  });

  it.each([
    ['MAX_SUBSCRIPTIONS', '0', 'between 1 and 100000'],
    ['PUBLISH_RATE_PER_S', '0', 'between 1 and 1000000'],
    ['PUBLISH_BURST', '2000000', 'between 1 and 1000000'],
    ['AUTH_FRAMES_PER_MINUTE', '0', 'between 1 and 10000'],
    ['MAX_CONNECTIONS_PER_TENANT', '0', 'between 1 and 10000000'],
    ['PRESENCE_TTL_MS', '299', 'between 300 and 600000'],
  ])('a limit out of range stops the start with its allowed range (%s=%s)', (variable, value, range) => {
    expect(() => loadConfig({ ...base, [variable]: value }, { standalone: false })).toThrow(`configuration error: ${variable} must be ${range}, got ${value}`);
  });

  it('reads every limit from its variable', () => {
    const c = loadConfig({ ...base, PUBLISH_RATE_PER_S: '5', PUBLISH_BURST: '7', AUTH_FRAMES_PER_MINUTE: '3', MAX_CONNECTIONS_PER_TENANT: '2', MAX_SUBSCRIPTIONS: '4' }, { standalone: false });
    expect([c.publishRatePerS, c.publishBurst, c.authFramesPerMinute, c.maxConnectionsPerTenant, c.maxSubscriptions]).toEqual([5, 7, 3, 2, 4]);
  });

  it('reads REDIS_PUBSUB (auto, plain or both)', () => {
    expect(['auto', 'plain', 'both'].map((v) => loadConfig({ ...base, REDIS_PUBSUB: v }, { standalone: false }).redisPubsub)).toEqual(['auto', 'plain', 'both']);
    expect(() => loadConfig({ ...base, REDIS_PUBSUB: 'PLAIN' }, { standalone: false })).toThrow('configuration error: REDIS_PUBSUB must be one of auto, plain, both');
  });

  it('puts the history journal under DATA_DIR unless HISTORY_DIR says otherwise', () => {
    expect(loadConfig({ ...base, DATA_DIR: '/var/lib/relay' }, { standalone: false }).historyDir).toBe('/var/lib/relay/history');
    expect(loadConfig({ ...base, DATA_DIR: '/var/lib/relay', HISTORY_DIR: '/srv/history' }, { standalone: false }).historyDir).toBe('/srv/history');
  });

  it('requires REDIS_URL when running alone', () => {
    expect(() => loadConfig(base, { standalone: true })).toThrow(ConfigError);
    expect(loadConfig({ ...base, REDIS_URL: 'redis://127.0.0.1:6379' }, { standalone: true }).redis.url).toBe('redis://127.0.0.1:6379');
  });
});
