import { createServer as createHttpServer, type RequestListener, type Server as HttpServer } from 'node:http';
import { closeServer, createLogger, listen, startTracing, startUsageMetering, type UsageSink, systemClock, traceRequests, traceUpgrades, withTimeout, type Clock, type Logger, type Tracing } from '@service-relay/core';
import { createOpsServer, guardConnections } from '@service-relay/edge';
import { RegistryUsageClient } from '@service-relay/grpc';
import { createTenantEventBus, createTenantFeed, type TenantEventBus, type TenantFeedHandle } from '@service-relay/tenant-events';
import { createVerifierClient, type VerifierClient, type VerifyResult } from '@service-relay/verifier-client';
import { Authenticator } from './auth/authenticator';
import { VerificationCache } from './auth/verification-cache';
import type { GatewayConfig } from './config';
import { createApp } from './http/create-app';
import { ConnectionHold } from './limits/connection-hold';
import { LoadShedder } from './limits/load-shedder';
import { UnprovenLane } from './limits/unproven-lane';
import { RefusalBudget } from './limits/refusal-budget';
import { createGatewayMetrics } from './metrics';
import { gatewayReadiness } from './http/readiness';
import { createUpstreamAgent } from './http/upstream-agent';
import { roundRobin } from './http/upstream-pool';
import { createWsProxy, type WsHandoff } from './http/ws-proxy';

export interface GatewayDeps {
  /** The launcher's shared bus; the gateway then leaves closing it to the launcher. */
  bus?: TenantEventBus;
  /** Tests inject a ManualTenantFeed; otherwise the gateway pulls from the registry. */
  feed?: TenantFeedHandle;
  logger?: Logger;
  verifier?: VerifierClient;
  clock?: Clock;
  /** Tests inject one with an in-memory exporter; otherwise made from config.tracing (and shut down at stop). */
  tracing?: Tracing;
  /** Where usage flushes go (#30); default: the registry's Usage.Flush when the gateway pulls its own feed, else none (nothing metered). */
  usageSink?: UsageSink;
  /**
   * Realtime's `upgrade` listener when realtime runs in this process (`npm
   * start`): `/ws` upgrades are handed to it, socket and all, instead of
   * being piped to REALTIME_URL through a second socket (#34).
   */
  wsHandoff?: WsHandoff;
}

export interface GatewayServer {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** The bound port (after start()). */
  readonly port: number;
  /** The ops listener's bound port: /healthz, /readyz, /metrics (after start()). */
  readonly opsPort: number;
}

/** Bounds the verification cache; at ~300 bytes an entry this is a few tens of MB at most. */
const AUTH_CACHE_MAX_ENTRIES = 100_000;

export function createServer(config: GatewayConfig, deps: GatewayDeps = {}): GatewayServer {
  const logger = deps.logger ?? createLogger({ service: 'edge-gateway', level: config.logLevel });
  const clock = deps.clock ?? systemClock;
  const tracing = deps.tracing ?? startTracing('edge-gateway', config.tracing);
  const bus = deps.bus ?? createTenantEventBus(config.redis, logger);
  const feed = deps.feed ?? createTenantFeed({ kind: 'edge-gateway', registryAddr: config.tenantFeed.registryAddr, internalToken: config.internalToken, leaseMs: config.tenantFeed.leaseMs, bus, ...(deps.clock && { clock: deps.clock }), logger });
  const verifier = deps.verifier ?? createVerifierClient({ address: config.verifierAddr, internalToken: config.internalToken, deadlineMs: config.verifyDeadlineMs, logger });

  const metrics = createGatewayMetrics();
  feed.addMetrics(metrics.registry, 'relay_gateway');
  const cache = new VerificationCache({ ttlMs: config.authCacheTtlS * 1000, maxEntries: AUTH_CACHE_MAX_ENTRIES, clock });
  const agent = createUpstreamAgent();
  const budget = new RefusalBudget({ perMinute: config.overload.refusedPerAddressPerMinute, burst: config.overload.refusedBurst, clock });
  const lane = new UnprovenLane({ maxInFlight: config.overload.unprovenInFlight, maxQueued: config.overload.unprovenQueue });
  metrics.observeLane(() => lane.current);
  // A verifier call for a token of a tenant not served here recently waits its turn in the lane (cache hits never do).
  const gate = (token: string, call: () => Promise<VerifyResult>) => (budget.tokenOfServedTenant(token) ? call() : lane.admit(call));
  const authenticator = new Authenticator({ verifier, cache, feed, logger, observer: metrics.auth, gate });
  const shedder = new LoadShedder({ maxInFlight: config.overload.maxInFlight, maxEventLoopDelayMs: config.overload.maxEventLoopDelayMs });
  metrics.observeLoad(() => shedder.current);
  const hold = new ConnectionHold(config.overload.refusedHoldMs);
  metrics.observeHold(() => hold.current);
  // The gateway meters only the refusals it makes for a verified tenant (realtime counts everything else).
  const usageClient =
    !deps.usageSink && !deps.feed && config.usage.enabled ? new RegistryUsageClient({ address: config.tenantFeed.registryAddr, internalToken: config.internalToken, deadlineMs: 5000, logger }) : undefined;
  const usage = startUsageMetering(config.usage, {
    service: 'gateway',
    metricsPrefix: 'gateway',
    sink: deps.usageSink ?? (usageClient && ((flush) => usageClient.flush(flush))),
    ...(usageClient && { close: () => usageClient.close() }),
    registry: metrics.registry,
    logger,
  });
  const app = createApp({
    ...(usage && { usage: usage.meter }),
    budget,
    shedder,
    hold,
    lane,
    config,
    logger,
    metrics,
    agent,
    authenticator,
  });
  // /readyz and /metrics on a port of their own (the public one answers them 404); never shed, never capped.
  const ops = createOpsServer({ metrics: metrics.registry, readiness: gatewayReadiness(verifier, { registry: config.registryUrls, ...realtimeChecks(config.realtimeUrls) }) });
  // One span per request; upstreams (realtime, the registry) and the verifier
  // check continue it: the proxy copies the traceparent this sets.
  const server = createListener(traceRequests(tracing, app, { forward: true }), config, logger);
  // One public origin: WebSocket upgrades on /ws go to realtime (which verifies the token), under the same connection guard.
  const wsProxy = createWsProxy({ ...(deps.wsHandoff && { handoff: deps.wsHandoff }), realtime: roundRobin(config.realtimeUrls), timeoutMs: config.upstreamTimeoutMs, maxRequestHeaders: config.maxRequestHeaders, trustProxy: config.trustProxy, logger, metrics });
  server.on('upgrade', traceUpgrades(tracing, wsProxy.handle));
  let port = 0;
  let opsPort = 0;

  return {
    get port() {
      return port;
    },
    get opsPort() {
      return opsPort;
    },
    async start() {
      // Not fatal: until the feed is current the cache is simply not trusted.
      await Promise.all([feed.start(), withTimeout(bus.ready(), 3000).catch(() => logger.warn('tenant event bus not ready at start; polling the tenant feed until it is'))]);
      // Connect the verifier channel now so the first request does not pay for it
      // (and cannot miss its deadline doing so); not fatal, checks fail closed until it is up.
      if (!(await verifier.ready())) logger.warn({ verifier: config.verifierAddr }, 'verifier not reachable at start');
      port = await listen(server, config.port, config.host);
      // Last: its /readyz 200 means the public port listens.
      opsPort = await listen(ops, config.opsPort, config.opsHost);
      usage?.start();
      logger.info({ host: config.host, port, ops_host: config.opsHost, ops_port: opsPort, verifier: config.verifierAddr, registry: config.registryUrls, realtime: config.realtimeUrls }, 'edge-gateway listening');
    },
    async stop() {
      // Not ready from the first moment of the stop.
      const opsClosing = closeServer(ops, 1000);
      const closing = closeServer(server);
      wsProxy.closeAll();
      await Promise.all([closing, opsClosing]);
      // The final usage flush: every request answered, the registry still up (the launcher stops it last).
      await usage?.stop();
      agent.destroy();
      shedder.close();
      authenticator.close();
      if (!deps.feed) feed.close();
      if (!deps.verifier) verifier.close();
      if (!deps.bus) await bus.close();
      if (!deps.tracing) await tracing.shutdown();
    },
  };
}

/**
 * The public HTTP listener around the gateway's request handler, under the
 * connection guard (caps, first-byte timeout). The bench's no-auth gateway
 * uses the same one, so its figures differ from ours by the auth step only.
 * Upgrades are the caller's to add, before it listens.
 */
export function createListener(handler: RequestListener, config: Pick<GatewayConfig, 'maxRequestHeaders' | 'connectionLimits'>, logger?: Logger): HttpServer {
  // Node keeps only the first maxHeadersCount fields; one past the cap is
  // enough for create-app to see the excess and answer 431. Truncation can
  // drop a trailing Host, so Node must not answer a bare 400 for that first:
  // create-app checks Host itself, after the count.
  const server = createHttpServer({ requireHostHeader: false }, handler);
  server.maxHeadersCount = config.maxRequestHeaders + 1;
  guardConnections(server, config.connectionLimits, logger);
  return server;
}

/** One readiness check per realtime instance: `realtime`, then `realtime_2`, `realtime_3`, … */
function realtimeChecks(urls: readonly string[]): Record<string, string> {
  return Object.fromEntries(urls.map((url, i) => [i === 0 ? 'realtime' : `realtime_${i + 1}`, url]));
}
