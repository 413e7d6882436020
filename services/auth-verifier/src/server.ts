import * as grpc from '@grpc/grpc-js';
import type { Server as HttpServer } from 'node:http';
import { closeServer, createLogger, listen, startTracing, systemClock, withTimeout, type Clock, type Logger, type Service, type Tracing } from '@service-relay/core';
import { createOpsServer, type ReadinessCheck } from '@service-relay/edge';
import { bindServer, grpcAddress, HealthService, serviceDefinition, stopServer, VERIFIER_PROTO, VERIFIER_SERVICE } from '@service-relay/grpc';
import { createTenantEventBus, createTenantFeed, type TenantEventBus, type TenantFeed } from '@service-relay/tenant-events';
import type { VerifierConfig } from './config';
import { tokenVerifierHandlers } from './grpc-handlers';
import { CachingKeySource } from './keys/caching-key-source';
import { createSharedKeyCache } from './keys/create-shared-key-cache';
import type { KeySource, KeySourceObserver } from './keys/key-source';
import type { SharedKeyCache } from './keys/shared-key-cache';
import { RegistryKeyClient } from './grpc/registry-key-client';
import { createVerifierMetrics } from './metrics';
import { TokenVerifier } from './token/token-verifier';

export interface VerifierDeps {
  /** The launcher's shared bus; otherwise one is made from config.redis. */
  bus?: TenantEventBus;
  logger?: Logger;
  clock?: Clock;
  keySource?: KeySource;
  /** Tests inject one with an in-memory exporter; otherwise made from config.tracing (and shut down at stop). */
  tracing?: Tracing;
}

export interface VerifierServer extends Service {
  /** Bound ports, known after start(). */
  readonly grpcPort: number;
  readonly httpPort: number;
}

/** A registry fetch not answered within this fails the check closed. */
const REGISTRY_DEADLINE_MS = 2000;

export function createServer(config: Readonly<VerifierConfig>, deps: VerifierDeps = {}): VerifierServer {
  const logger = deps.logger ?? createLogger({ service: 'auth-verifier', level: config.logLevel });
  const clock = deps.clock ?? systemClock;
  const tracing = deps.tracing ?? startTracing('auth-verifier', config.tracing);
  const ownBus = deps.bus === undefined;
  const bus = deps.bus ?? createTenantEventBus(config.redis, logger);
  const feed = createTenantFeed({ kind: 'auth-verifier', registryAddr: config.tenantFeed.registryAddr, internalToken: config.internalToken, leaseMs: config.tenantFeed.leaseMs, bus, ...(deps.clock && { clock: deps.clock }), logger });
  const metrics = createVerifierMetrics();
  const registry = metrics.registry;
  feed.addMetrics(registry, 'relay_verifier');
  const parts = deps.keySource ? undefined : defaultKeySource(config, feed, clock, logger, metrics.keys);
  const keySource = deps.keySource ?? parts!.source;
  const verifier = new TokenVerifier({ keySource, clock, maxLifetimeS: config.maxTokenLifetimeS, logger, observer: metrics.verification });

  // Callers hold one VerifyStream open for a long time and keep it alive with
  // pings (verifier-client: every 10 s); accept them instead of answering GOAWAY.
  const grpcServer = new grpc.Server({ 'grpc.keepalive_permit_without_calls': 1, 'grpc.http2.min_ping_interval_without_data_ms': 5_000 });
  grpcServer.addService(serviceDefinition(VERIFIER_PROTO, VERIFIER_SERVICE), tokenVerifierHandlers(verifier, logger, config.acceptedInternalTokens, tracing));
  const health = new HealthService([VERIFIER_SERVICE]);
  health.addTo(grpcServer);

  // Each dependency is its own check with its own deadline (a hanging Redis
  // must not hide a healthy registry). The tenant feed's state is in /metrics,
  // not here: without it the verifier still answers correctly (from the
  // registry, or fails closed).
  const readiness: ReadinessCheck = parts
    ? {
        registry: () => parts.fetcher.ready(),
        ...(parts.shared && { redis: () => parts.shared!.ready() }),
        ...(config.redis.url && { bus: () => bus.ready() }),
      }
    : { keys: async () => Object.values(await keySource.readiness()).every(Boolean) };
  // Its HTTP port is its ops listener, as the other services' *_OPS_PORT: /healthz, /readyz, /metrics, nothing else.
  const http: HttpServer = createOpsServer({ metrics: registry, readiness });

  let grpcPort = 0;
  let httpPort = 0;
  return {
    get grpcPort() {
      return grpcPort;
    },
    get httpPort() {
      return httpPort;
    },
    async start() {
      await keySource.start();
      // Until the feed is current the key source trusts no cache, so a slow
      // registry or bus delays nothing but caching.
      await Promise.all([feed.start(), withTimeout(bus.ready(), 5000).catch(() => logger.warn('tenant event bus not ready yet; polling the tenant feed until it is'))]);
      grpcPort = await bindServer(grpcServer, grpcAddress(config.grpcHost, config.grpcPort));
      httpPort = await listen(http, config.httpPort, config.httpHost);
      logger.info({ grpc_host: config.grpcHost, grpc_port: grpcPort, http_host: config.httpHost, http_port: httpPort, registry: config.registryAddr }, 'auth-verifier listening');
    },
    async stop() {
      health.setAll('NOT_SERVING');
      health.endWatches();
      await stopServer(grpcServer);
      await closeServer(http);
      await keySource.close();
      feed.close();
      if (ownBus) await bus.close();
      // Last: flushes the spans of the checks answered while stopping.
      if (!deps.tracing) await tracing.shutdown();
    },
  };
}

function defaultKeySource(
  config: Readonly<VerifierConfig>,
  feed: TenantFeed,
  clock: Clock,
  logger: Logger,
  observer: KeySourceObserver,
): { source: KeySource; fetcher: RegistryKeyClient; shared: SharedKeyCache | undefined } {
  const ttlMs = config.keyCacheTtlS * 1000;
  const shared = createSharedKeyCache(config.redis, { cacheKeys: config.cacheKeys, ttlMs, logger });
  const fetcher = new RegistryKeyClient({ address: config.registryAddr, internalToken: config.internalToken, deadlineMs: REGISTRY_DEADLINE_MS, logger });
  return { source: new CachingKeySource({ fetcher, shared, feed, clock, logger, ttlMs, observer }), fetcher, shared };
}
