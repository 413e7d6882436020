import { ConfigError } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config';

const base = { INTERNAL_TOKEN: 'int-9f2KqW7xLm3RbT8vNc5YhJ0dPe4sGa6u' };

describe('loadConfig', () => {
  it('has the documented defaults and is frozen', () => {
    const c = loadConfig(base);
    expect(c).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      opsPort: 9080,
      opsHost: '127.0.0.1',
      connectionLimits: { firstByteTimeoutMs: 10_000, maxConnections: 19_000, maxPerAddress: 1_000 },
      maxRequestHeaders: 100,
      verifierAddr: '127.0.0.1:50051',
      registryUrl: 'http://127.0.0.1:8082',
      registryUrls: ['http://127.0.0.1:8082'],
      realtimeUrl: 'http://127.0.0.1:8081',
      realtimeUrls: ['http://127.0.0.1:8081'],
      corsOrigins: [],
      upstreamTimeoutMs: 10_000,
      verifyDeadlineMs: 2000,
      authCacheTtlS: 30,
      trustProxy: false,
      overload: { refusedPerAddressPerMinute: 60, refusedBurst: 20, maxInFlight: 2000, maxEventLoopDelayMs: 500 },
      redis: { url: undefined, prefix: 'relay:' },
    });
    expect(Object.isFrozen(c)).toBe(true);
    expect(c).not.toHaveProperty('authenticate');
  });

  it('reads the ops listener (its own port and bind address), which must not be the public port', () => {
    expect(loadConfig({ ...base, GATEWAY_OPS_PORT: '9100', GATEWAY_OPS_HOST: '0.0.0.0', BIND_HOST: '10.0.0.5' })).toMatchObject({ opsPort: 9100, opsHost: '0.0.0.0', host: '10.0.0.5' });
    expect(loadConfig({ ...base, BIND_HOST: '0.0.0.0' }).opsHost).toBe('0.0.0.0');
    expect(loadConfig({ ...base, GATEWAY_PORT: '0', GATEWAY_OPS_PORT: '0' })).toMatchObject({ port: 0, opsPort: 0 });
    expect(() => loadConfig({ ...base, GATEWAY_OPS_PORT: '8080' })).toThrow('configuration error: GATEWAY_OPS_PORT must differ from GATEWAY_PORT (8080)');
    expect(() => loadConfig({ ...base, GATEWAY_OPS_PORT: 'x' })).toThrow(ConfigError);
  });

  it('parses CORS origins and trusted proxies', () => {
    expect(loadConfig({ ...base, CORS_ORIGINS: 'https://a.example, http://localhost:3000' }).corsOrigins).toEqual(['https://a.example', 'http://localhost:3000']);
    expect(loadConfig({ ...base, CORS_ORIGINS: '*' }).corsOrigins).toBe('*');
    expect(loadConfig({ ...base, TRUST_PROXY: 'true' }).trustProxy).toBe(true);
  });

  it('reads the overload settings; SHED_EVENT_LOOP_DELAY_MS=0 turns the delay check off', () => {
    const c = loadConfig({ ...base, REFUSED_AUTH_RATE_LIMIT: '30', REFUSED_AUTH_BURST: '5', MAX_REQUESTS_IN_FLIGHT: '50', SHED_EVENT_LOOP_DELAY_MS: '0', REFUSED_AUTH_HOLD_MS: '0', UNPROVEN_AUTH_IN_FLIGHT: '2', UNPROVEN_AUTH_QUEUE: '0' });
    expect(c.overload).toEqual({ refusedPerAddressPerMinute: 30, refusedBurst: 5, refusedHoldMs: 0, unprovenInFlight: 2, unprovenQueue: 0, maxInFlight: 50, maxEventLoopDelayMs: 0 });
    expect(loadConfig(base).overload).toMatchObject({ refusedHoldMs: 5000, unprovenInFlight: 4, unprovenQueue: 1024 });
  });

  it('takes REALTIME_URL as a comma-separated list of instances (the first is realtimeUrl)', () => {
    const c = loadConfig({ ...base, REALTIME_URL: 'http://rt-a:8081/, https://rt-b:8443' });
    expect(c.realtimeUrls).toEqual(['http://rt-a:8081', 'https://rt-b:8443']);
    expect(c.realtimeUrl).toBe('http://rt-a:8081');
    expect(Object.isFrozen(c.realtimeUrls)).toBe(true);
  });

  it('takes REGISTRY_URL as a comma-separated list of replicas (the first is registryUrl), and REGISTRY_GRPC_ADDR as a list of IP addresses', () => {
    const c = loadConfig({ ...base, REGISTRY_URL: 'http://10.0.0.1:8082/, http://10.0.0.2:8082', REGISTRY_GRPC_ADDR: '10.0.0.1:50052,10.0.0.2:50052' });
    expect(c.registryUrls).toEqual(['http://10.0.0.1:8082', 'http://10.0.0.2:8082']);
    expect(c.registryUrl).toBe('http://10.0.0.1:8082');
    expect(c.tenantFeed.registryAddr).toBe('ipv4:10.0.0.1:50052,10.0.0.2:50052');
  });

  it.each([
    [{ INTERNAL_TOKEN: 'short' }, 'INTERNAL_TOKEN'],
    [{ ...base, REGISTRY_URL: 'http://a:1,,http://b:2' }, 'REGISTRY_URL'],
    [{ ...base, REGISTRY_GRPC_ADDR: 'registry-a:50052,registry-b:50052' }, 'REGISTRY_GRPC_ADDR'],
    [{ ...base, REALTIME_URL: 'http://a:1,ftp://b' }, 'REALTIME_URL'],
    [{ ...base, REALTIME_URL: 'http://a:1,,http://b:2' }, 'REALTIME_URL'],
    [{ ...base, REALTIME_URL: 'http://a:1,http://a:1/' }, 'REALTIME_URL'],
    [{ ...base, REALTIME_URL: 'http://a:1,not a url' }, 'REALTIME_URL'],
    [{ ...base, GATEWAY_PORT: 'x' }, 'GATEWAY_PORT'],
    [{ ...base, REALTIME_URL: 'ftp://x' }, 'REALTIME_URL'],
    [{ ...base, VERIFIER_ADDR: 'nohost' }, 'VERIFIER_ADDR'],
    [{ ...base, MAX_REQUEST_HEADERS: '5' }, 'MAX_REQUEST_HEADERS'],
    [{ ...base, GATEWAY_HOST: 'not a host' }, 'GATEWAY_HOST'],
    [{ ...base, FIRST_BYTE_TIMEOUT_MS: '0' }, 'FIRST_BYTE_TIMEOUT_MS'],
    [{ INTERNAL_TOKEN: 'change-me-internal-token-at-least-32-chars' }, 'INTERNAL_TOKEN'],
    [{ ...base, CORS_ORIGINS: 'https://a.example/path' }, 'CORS_ORIGINS'],
    [{ ...base, TRUST_PROXY: 'maybe' }, 'TRUST_PROXY'],
    [{ ...base, REFUSED_AUTH_RATE_LIMIT: '0' }, 'REFUSED_AUTH_RATE_LIMIT'],
    [{ ...base, REFUSED_AUTH_BURST: '0' }, 'REFUSED_AUTH_BURST'],
    [{ ...base, UNPROVEN_AUTH_IN_FLIGHT: '0' }, 'UNPROVEN_AUTH_IN_FLIGHT'],
    [{ ...base, REFUSED_AUTH_HOLD_MS: '-1' }, 'REFUSED_AUTH_HOLD_MS'],
    [{ ...base, MAX_REQUESTS_IN_FLIGHT: '0' }, 'MAX_REQUESTS_IN_FLIGHT'],
    [{ ...base, SHED_EVENT_LOOP_DELAY_MS: '5' }, 'SHED_EVENT_LOOP_DELAY_MS'],
    [{ ...base, SHED_EVENT_LOOP_DELAY_MS: '-1' }, 'SHED_EVENT_LOOP_DELAY_MS'],
  ])('names the bad variable (%o)', (env, variable) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(expect.objectContaining({ variable }));
  });

  it('requires REDIS_URL when started alone', () => {
    expect(() => loadConfig(base, { standalone: true })).toThrow(expect.objectContaining({ variable: 'REDIS_URL' }));
    expect(loadConfig({ ...base, REDIS_URL: 'redis://127.0.0.1:6379' }, { standalone: true }).redis.url).toBe('redis://127.0.0.1:6379');
  });
});
