import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { closeServer, createLogger, createRateLimiter, createRedis, Keyring, listen, systemClock, type Clock, type Logger, type Redis, type Service } from '@service-relay/core';
import { createOpsServer, guardConnections, handleHealth, internalCaller } from '@service-relay/edge';
import { bindServer, grpcAddress, HealthService, REGISTRY_FEED_SERVICE, REGISTRY_KEYS_SERVICE, stopServer } from '@service-relay/grpc';
import { createTenantEventBus, type TenantEventBus } from '@service-relay/tenant-events';
import { AdminTokens } from './audit/admin-tokens';
import { AuditLog } from './audit/audit-log';
import { AuditStore } from './audit/audit-store';
import type { RegistryConfig } from './config';
import { TenantCrypto } from './crypto/tenant-crypto';
import { KeyringCoordinator } from './secrets/keyring-coordinator';
import { openDatabases, type RegistryDatabases } from './db/create-db';
import { FeedAnswers } from './feed-mirror/feed-answers';
import { createFeedMirror } from './feed-mirror/create-feed-mirror';
import type { FeedMirror } from './feed-mirror/feed-mirror';
import { addFeedService } from './grpc/feed-service';
import { addKeyService } from './grpc/key-service';
import { addUsageService } from './grpc/usage-service';
import { AdminUsage } from './http/admin-usage';
import { UsageStore } from './store/usage-store';
import { AddressFailureLimit } from './http/address-failure-limit';
import { createApp } from './http/create-app';
import { AdminLive } from './http/admin-live';
import { readConsoleFiles } from './http/console-files';
import { createRegistryMetrics } from './metrics';
import { FeedStore } from './store/feed-store';
import { TenantStore } from './store/tenant-store';
import { UserActionsStore } from './store/user-actions-store';
import { HostSyncCheck } from './tenants/host-sync-check';
import { Propagation } from './tenants/propagation';
import { TenantAdmin } from './tenants/tenant-admin';
import { LimitsAdmin } from './tenants/limits-admin';
import { CallbacksAdmin } from './tenants/callbacks-admin';
import { UserActions } from './tenants/user-actions';
import { RealtimeClient } from './realtime/realtime-client';
import { createTokenExplainer, type TokenExplainer } from './verifier/token-explainer';
import type { InProcessWebhookEvents } from '@service-relay/webhook-events';
import { WebhookStore } from './store/webhook-store';
import { createWebhookEventSource } from './webhooks/webhook-source';
import { WebhookSender } from './webhooks/webhook-sender';
import { WebhooksAdmin } from './webhooks/webhooks-admin';

/** The latest feed sequence is announced on the bus this often, so a consumer that missed a notice pulls at once. */
const HEARTBEAT_MS = 1000;
const PRUNE_EVERY_MS = 3_600_000;
const HOST_FETCH_WINDOW_MS = 60_000;
/** A server publish or presence call to realtime not answered within this is 503 unavailable. */
const REALTIME_TIMEOUT_MS = 5000;
/** After HTTP has drained, consumers' calls in flight get this long. */
const RPC_GRACE_MS = 1000;
/** runMain's shutdown deadline (10 s) minus the gRPC grace and the closing of Redis and the databases. */
const MAX_HTTP_GRACE_MS = 8000;

/**
 * How long in-flight HTTP requests get on shutdown: an admin call's longest
 * path (its commit, the wait for confirmations, the audit row) with room to
 * spare, within runMain's deadline.
 */
export function httpGraceMs(config: Pick<RegistryConfig, 'propagationTimeoutMs' | 'database'>): number {
  const dbMs = config.database.kind === 'postgres' ? (config.database.pool?.timeoutMs ?? 600) : 600;
  return Math.min(MAX_HTTP_GRACE_MS, config.propagationTimeoutMs + 3 * dbMs + 1000);
}
/** An explain_token the verifier does not answer within this is 503 unavailable. */
const EXPLAIN_TIMEOUT_MS = 5000;

export interface RegistryDeps {
  /** The shared bus when every service runs in one process; else one is made from config.redis. */
  bus?: TenantEventBus;
  logger?: Logger;
  clock?: Clock;
  /** The embedded default's webhook events from realtime in the same process (#32; the launcher shares one). */
  webhookEvents?: InProcessWebhookEvents;
}

export interface RegistryServer extends Service {
  /** Bound ports, known once start() resolved (port 0 in config picks a free one). */
  readonly httpPort: number;
  readonly grpcPort: number;
  /** The ops listener's port: /healthz, /readyz, /metrics. */
  readonly opsPort: number;
}

/** Wires database, store, HTTP (admin API, host-sync fetch, ops) and gRPC (KeyService, health). */
export function createServer(config: RegistryConfig, deps: RegistryDeps = {}): RegistryServer {
  const logger = deps.logger ?? createLogger({ service: 'tenant-registry', level: config.logLevel });
  const ownsBus = deps.bus === undefined;
  const bus = deps.bus ?? createTenantEventBus(config.redis, logger);
  const metrics = createRegistryMetrics();
  let dbs: RegistryDatabases | undefined;
  let http: HttpServer | undefined;
  let rpc: grpc.Server | undefined;
  let health: HealthService | undefined;
  let propagation: Propagation | undefined;
  let mirror: FeedMirror | undefined;
  let explainer: TokenExplainer | undefined;
  let pruner: NodeJS.Timeout | undefined;
  let sender: WebhookSender | undefined;
  let keyring: KeyringCoordinator | undefined;
  let httpPort = 0;
  let grpcPort = 0;
  let opsPort = 0;

  // Ready while consumers can be answered: with Redis, from PostgreSQL or,
  // while it is down, from the feed mirror. Taking every registry out of its
  // Service during a PostgreSQL outage would end every consumer's lease.
  const databaseUp = async () => (await dbs?.main.ping()) ?? false;
  const feedDatabaseUp = async () => (await dbs?.feed.ping()) ?? false;
  // Not ready while a key seals that this replica lacks (secrets/keyring-coordinator.ts).
  const secretsKeyring = async () => keyring?.ready ?? false;
  const readiness: Record<string, () => Promise<boolean>> =
    config.redis.url === undefined
      ? { database: databaseUp, secrets_keyring: secretsKeyring }
      : {
          tenant_feed: async () => (await feedDatabaseUp()) || ((await mirror?.ready()) ?? false),
          // Not ready until the mirror holds the feed: before that, a PostgreSQL outage would refuse every user.
          feed_mirror: async () => (await mirror?.ready()) ?? false,
          tenant_events: () => bus.ready(),
          secrets_keyring: secretsKeyring,
        };
  // Failed host-sync fetches are counted in Redis when there is one (shared by
  // replicas); a slow Redis must not hold fetches: past 500 ms the in-process counter decides.
  let limiterRedis: Redis | undefined;

  // Listens last, once HTTP and gRPC do: its /readyz 200 means the pod can take traffic.
  const ops = createOpsServer({ metrics: metrics.registry, readiness });

  const stop = async (): Promise<void> => {
    clearInterval(pruner);
    // Not ready from the first moment of the stop (the ops listener goes first).
    await closeServer(ops, 1000);
    health?.setAll('NOT_SERVING');
    health?.endWatches();
    // In-flight HTTP requests are answered first (an admin call waits for the
    // consumers' confirmations, which come over gRPC, so gRPC and the
    // database keep serving until HTTP is closed); new connections are refused.
    if (http) {
      // A keep-alive connection whose request was already in flight when closing began is idle
      // once answered: ended then, not at the grace.
      const server = http;
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      await closeServer(server, httpGraceMs(config)).finally(() => clearInterval(sweep));
    }
    http = undefined;
    await sender?.stop();
    sender = undefined;
    propagation?.stop();
    if (rpc) await stopServer(rpc, RPC_GRACE_MS);
    rpc = undefined;
    limiterRedis?.disconnect();
    limiterRedis = undefined;
    // Last before the database: a stopping replica counts as holding its keys until nothing it serves remains.
    await keyring?.stop();
    keyring = undefined;
    mirror?.close();
    mirror = undefined;
    explainer?.close();
    explainer = undefined;
    if (ownsBus) await bus.close();
    await dbs?.close();
    dbs = undefined;
  };

  return {
    get httpPort() {
      return httpPort;
    },
    get grpcPort() {
      return grpcPort;
    },
    get opsPort() {
      return opsPort;
    },
    async start() {
      try {
        dbs = await openDatabases(config.database);
        const db = dbs.main;
        // The keyring's start check (a stored secret under a key this replica lacks stops it here, naming the variable).
        keyring = new KeyringCoordinator({ db: dbs.maintenance, liveDb: db, keyring: new Keyring(config.secretsKeys), variable: config.secretsKeysVariable, batch: config.reencryptBatch, logger });
        const crypto = new TenantCrypto(keyring.keyring, await keyring.join());
        keyring.start();
        const store = new TenantStore(db, crypto, deps.clock ?? systemClock, dbs.feed);
        mirror = createFeedMirror(config.redis, logger);
        propagation = new Propagation(store.feed, bus, logger, config.propagationTimeoutMs, undefined, mirror);
        // The mirror starts before this replica serves (the heartbeat keeps it level from then on).
        await propagation.repairMirror();
        propagation.startHeartbeat(HEARTBEAT_MS);
        const feed = store.feed;
        const audit = new AuditLog(new AuditStore(db), logger, {
          unauthenticatedPerMinute: config.auditUnauthenticatedPerMinute,
          ...(deps.clock ? { clock: deps.clock } : {}),
          onWrite: (result) => metrics.auditWrite(result),
        });
        // Pruning may take long on a big table: it runs on the maintenance connection, not the serving pools.
        const maintenance = {
          feed: new FeedStore(dbs.maintenance),
          audit: new AuditStore(dbs.maintenance),
          users: new UserActionsStore(dbs.maintenance, feed, deps.clock ?? systemClock),
          usage: new UsageStore(dbs.maintenance, deps.clock ?? systemClock),
        };
        pruner = setInterval(() => {
          maintenance.feed.prune(config.feedRetentionMs).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'tenant feed prune failed'));
          maintenance.audit.prune(config.auditRetentionMs).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'audit log prune failed'));
          // A revocation outlives every token it can concern (ARCHITECTURE "Host server API").
          maintenance.users.prune(config.feedRetentionMs / 1000).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'user revocations prune failed'));
          maintenance.usage.prune(config.usageRetentionMs).catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'usage prune failed'));
        }, PRUNE_EVERY_MS);
        pruner.unref();
        const adminTokens = new AdminTokens(config.adminToken, config.adminTokenNext);
        if (config.redis.url) {
          limiterRedis = createRedis({ url: config.redis.url, tls: config.redis.tls }, { connectionName: 'registry-rate-limit', commandTimeout: 500 });
          limiterRedis.on('error', (err: Error) => logger.debug({ err: err.message }, 'rate limiter redis error'));
        }
        const limiter = createRateLimiter({ limit: config.hostFetchRateLimit, windowMs: HOST_FETCH_WINDOW_MS, clock: deps.clock ?? systemClock, logger, redis: limiterRedis, prefix: config.redis.prefix });
        const addressLimiter = createRateLimiter({ limit: config.hostFetchAddressRateLimit, windowMs: HOST_FETCH_WINDOW_MS, clock: deps.clock ?? systemClock, logger, redis: limiterRedis, prefix: config.redis.prefix });
        const addresses = new AddressFailureLimit(addressLimiter, deps.clock ?? systemClock);
        const users = new UserActions(store.users, propagation, logger, (confirmed, seconds) => metrics.propagation(confirmed, seconds));
        const admin = new TenantAdmin(store, propagation, logger, (confirmed, seconds) => metrics.propagation(confirmed, seconds));
        const realtime = new RealtimeClient({ baseUrls: config.realtimeUrls, internalToken: config.internalToken, timeoutMs: REALTIME_TIMEOUT_MS });
        explainer = createTokenExplainer({ address: config.verifierAddr, internalToken: config.internalToken, deadlineMs: EXPLAIN_TIMEOUT_MS });
        const usage = new UsageStore(db, deps.clock ?? systemClock);
        const files = config.consoleDir === undefined ? undefined : readConsoleFiles(config.consoleDir);
        if (config.consoleDir !== undefined && !files) logger.warn({ console_dir: config.consoleDir }, 'operator console not built: /console/ answers 404 (npm run build -w @service-relay/console)');
        const webhookStore = new WebhookStore(db, store.feed);
        const webhooks = new WebhooksAdmin(webhookStore, crypto, deps.clock ?? systemClock, config.webhooks.allowHttp, propagation, logger, (confirmed, seconds) => metrics.propagation(confirmed, seconds), () => sender?.poke());
        sender = new WebhookSender({
          store: webhookStore,
          source: createWebhookEventSource(config.redis, deps.webhookEvents, logger),
          crypto,
          settings: config.webhooks,
          clock: deps.clock ?? systemClock,
          logger,
          metrics: metrics.webhooks,
        });
        sender.start();
        const app = createApp({
          consoleFiles: files,
          secretsKey: keyring,
          live: new AdminLive(store.feed, realtime),
          webhooks,
          usage: new AdminUsage(usage, admin, () => (deps.clock ?? systemClock).now()),
          explainer,
          hostFetch: { limiter, fromGateway: internalCaller(config.acceptedInternalTokens), addresses },
          hostApi: { users, realtime, ...(deps.clock && { clock: deps.clock }) },
          admin,
          limits: new LimitsAdmin(store.limits, propagation, logger, (confirmed, seconds) => metrics.propagation(confirmed, seconds)),
          callbacks: new CallbacksAdmin(store.callbacks, propagation, logger, config.callbackAllowHttp, (confirmed, seconds) => metrics.propagation(confirmed, seconds)),
          hostSync: new HostSyncCheck(store, crypto.hostSync),
          adminTokens,
          audit,
          metrics,
          logger,
        });
        // /healthz only (the gateway's readiness checks it here); /readyz and /metrics are on the ops port.
        http = createHttpServer((req, res) => {
          if (!handleHealth(req, res)) app(req, res);
        });
        // The gateway's and realtime's guard: caps, and a connection that sends no request head in time is cut.
        guardConnections(http, config.connectionLimits, logger);
        httpPort = await listen(http, config.httpPort, config.httpHost);
        rpc = new grpc.Server();
        addKeyService(rpc, store, config.acceptedInternalTokens, metrics, logger);
        addUsageService(rpc, usage, config.acceptedInternalTokens, metrics, logger);
        const p = propagation;
        addFeedService(rpc, new FeedAnswers(store.feed, mirror, () => p.progressed(), logger), store.channelRules, config.acceptedInternalTokens, metrics, logger, store.limits, store.callbacks, webhookStore);
        health = new HealthService([REGISTRY_KEYS_SERVICE, REGISTRY_FEED_SERVICE]);
        health.addTo(rpc);
        grpcPort = await bindServer(rpc, grpcAddress(config.grpcHost, config.grpcPort));
        opsPort = await listen(ops, config.opsPort, config.opsHost);
        logger.info({ http_host: config.httpHost, http_port: httpPort, grpc_host: config.grpcHost, grpc_port: grpcPort, ops_host: config.opsHost, ops_port: opsPort, database: config.database.kind, admin_tokens: adminTokens.actors }, 'tenant-registry listening');
      } catch (err) {
        await stop().catch(() => {});
        throw err;
      }
    },
    stop,
  };
}
