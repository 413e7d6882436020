import { createMetricsRegistry } from '@service-relay/core';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AuthObserver } from './auth/authenticator';

/** Route labels are a closed set so a client cannot grow the metric's cardinality. */
export type RouteLabel = 'api_v1' | 'host_fetch' | 'host_api' | 'ops' | 'preflight' | 'not_found' | 'ws';

export interface GatewayMetrics {
  registry: Registry;
  request(route: RouteLabel, status: number): void;
  upstreamError(upstream: string, kind: 'unavailable' | 'timeout'): void;
  rateLimited(): void;
  /** WebSockets proxied to realtime and open now (+1 at the 101, -1 at close). */
  websocketOpened(): void;
  websocketClosed(): void;
  auth: AuthObserver;
}

export function createGatewayMetrics(): GatewayMetrics {
  const registry = createMetricsRegistry('edge-gateway');
  const requests = new Counter({ name: 'gateway_http_requests_total', help: 'HTTP requests by route and status', labelNames: ['route', 'status'], registers: [registry] });
  const authLatency = new Histogram({
    name: 'gateway_auth_verify_seconds',
    help: 'Verifier round trips by outcome (cache hits are not calls)',
    labelNames: ['outcome'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const cacheHits = new Counter({ name: 'gateway_auth_cache_hits_total', help: 'Tokens accepted from the verification cache', registers: [registry] });
  const cacheMisses = new Counter({ name: 'gateway_auth_cache_misses_total', help: 'Tokens not in the verification cache', registers: [registry] });
  const upstreamErrors = new Counter({ name: 'gateway_upstream_errors_total', help: 'Upstream failures by upstream and kind', labelNames: ['upstream', 'kind'], registers: [registry] });
  const limited = new Counter({ name: 'gateway_host_fetch_rate_limited_total', help: 'Host-sync fetches refused by the rate limit', registers: [registry] });
  const websockets = new Gauge({ name: 'gateway_websockets', help: 'WebSockets proxied to realtime, open now', registers: [registry] });
  return {
    registry,
    request: (route, status) => requests.inc({ route, status: String(status) }),
    upstreamError: (upstream, kind) => upstreamErrors.inc({ upstream, kind }),
    rateLimited: () => limited.inc(),
    websocketOpened: () => websockets.inc(),
    websocketClosed: () => websockets.dec(),
    auth: {
      cacheHit: () => cacheHits.inc(),
      cacheMiss: () => cacheMisses.inc(),
      verified: (seconds, outcome) => authLatency.observe({ outcome }, seconds),
    },
  };
}
