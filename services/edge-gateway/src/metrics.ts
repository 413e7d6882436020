import { createMetricsRegistry } from '@service-relay/core';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AuthObserver } from './auth/authenticator';

/** Route labels are a closed set so a client cannot grow the metric's cardinality. */
export type RouteLabel = 'api_v1' | 'host_fetch' | 'host_api' | 'ops' | 'preflight' | 'not_found' | 'ws';

export interface GatewayMetrics {
  registry: Registry;
  /** One answered request (or WebSocket upgrade), with the seconds from its start to its answer. */
  request(route: RouteLabel, status: number, seconds: number): void;
  upstreamError(upstream: string, kind: 'unavailable' | 'timeout'): void;
  rateLimited(): void;
  /** Answered 429 by the gateway itself: the client address is past its budget of refused credentials. */
  refusedAuthLimited(route: RouteLabel): void;
  /** Answered 503: the gateway is past its in-flight or event-loop-delay bound, or the unproven lane's queue is full. */
  shed(reason: 'in_flight' | 'event_loop_delay' | 'unproven_lane'): void;
  /** WebSockets proxied to realtime and open now (+1 at the 101, -1 at close). */
  /** Reports the shedder's state at each scrape (requests in flight, the last sampled event-loop delay). */
  observeLoad(current: () => { inFlight: number; eventLoopDelayMs: number }): void;
  /** Reports the connections held after the gateway's own 429 (now, and since start) at each scrape. */
  observeHold(current: () => { held: number; total: number }): void;
  /** Reports the unproven lane's calls running and waiting at each scrape. */
  observeLane(current: () => { active: number; queued: number }): void;
  websocketOpened(): void;
  websocketClosed(): void;
  /** An upgrade handed to realtime in this process (`npm start`): realtime answers and counts it. */
  upgradeHandedOff(): void;
  auth: AuthObserver;
}

export function createGatewayMetrics(): GatewayMetrics {
  const registry = createMetricsRegistry('edge-gateway');
  const requests = new Counter({ name: 'gateway_http_requests_total', help: 'HTTP requests by route and status', labelNames: ['route', 'status'], registers: [registry] });
  // The request-latency objective's histogram (docs/OPERATIONS.md "Objectives"): few
  // buckets around its 250 ms threshold, one child per route resolved once.
  const durations = new Histogram({
    name: 'gateway_http_request_duration_seconds',
    help: 'Time from a request\'s start to its answer (a WebSocket upgrade: to the 101 or the refusal), by route',
    labelNames: ['route'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const durationChildren = new Map<RouteLabel, ReturnType<typeof durations.labels>>();
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
  const refusedLimited = new Counter({ name: 'gateway_refused_auth_limited_total', help: 'Requests answered 429 because their client address is past its budget of refused credentials', labelNames: ['route'], registers: [registry] });
  const shed = new Counter({ name: 'gateway_shed_requests_total', help: 'Requests answered 503 before any work, by the bound that was passed', labelNames: ['reason'], registers: [registry] });
  const websockets = new Gauge({ name: 'gateway_websockets', help: 'WebSockets proxied to realtime, open now', registers: [registry] });
  const handedOff = new Counter({ name: 'gateway_ws_upgrades_handed_off_total', help: 'WebSocket upgrades handed to realtime in this process (npm start), which answers and counts them', registers: [registry] });
  let load: () => { inFlight: number; eventLoopDelayMs: number } = () => ({ inFlight: 0, eventLoopDelayMs: 0 });
  new Gauge({ name: 'gateway_requests_in_flight', help: 'Requests admitted and not yet answered', registers: [registry], collect() {
    this.set(load().inFlight);
  } });
  new Gauge({ name: 'gateway_event_loop_delay_seconds', help: 'Event-loop delay (p99) of the shedder\'s last sample', registers: [registry], collect() {
    this.set(load().eventLoopDelayMs / 1000);
  } });
  let hold: () => { held: number; total: number } = () => ({ held: 0, total: 0 });
  new Gauge({ name: 'gateway_held_connections', help: 'Connections not read from until the Retry-After of the 429 they were answered has passed', registers: [registry], collect() {
    this.set(hold().held);
  } });
  new Counter({ name: 'gateway_held_connections_total', help: 'Connections held after a 429 of the gateway, since start', registers: [registry], collect() {
    this.reset();
    this.inc(hold().total);
  } });
  let lane: () => { active: number; queued: number } = () => ({ active: 0, queued: 0 });
  new Gauge({ name: 'gateway_unproven_lane', help: 'Verifier and registry calls for credentials of tenants not served here recently, running and waiting', labelNames: ['state'], registers: [registry], collect() {
    const { active, queued } = lane();
    this.set({ state: 'active' }, active);
    this.set({ state: 'queued' }, queued);
  } });
  return {
    registry,
    observeLoad: (current) => {
      load = current;
    },
    observeHold: (current) => {
      hold = current;
    },
    observeLane: (current) => {
      lane = current;
    },
    request(route, status, seconds) {
      requests.inc({ route, status: String(status) });
      let d = durationChildren.get(route);
      if (!d) durationChildren.set(route, (d = durations.labels(route)));
      d.observe(seconds);
    },
    upstreamError: (upstream, kind) => upstreamErrors.inc({ upstream, kind }),
    rateLimited: () => limited.inc(),
    refusedAuthLimited: (route) => refusedLimited.inc({ route }),
    shed: (reason) => shed.inc({ reason }),
    websocketOpened: () => websockets.inc(),
    websocketClosed: () => websockets.dec(),
    upgradeHandedOff: () => handedOff.inc(),
    auth: {
      cacheHit: () => cacheHits.inc(),
      cacheMiss: () => cacheMisses.inc(),
      verified: (seconds, outcome) => authLatency.observe({ outcome }, seconds),
    },
  };
}
