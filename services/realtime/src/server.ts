import type { BatchMode } from './ws/batch-frame';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { closeServer, createLogger, startUsageMetering, type UsageMetering, type UsageSink, listen, startTracing, traceRequests, traceUpgrades, withTimeout, type Clock, type Logger, type Tracing } from '@service-relay/core';
import { createOpsServer, guardConnections, handleHealth, rawErrorResponse, sendError } from '@service-relay/edge';
import { createTenantEventBus, createTenantFeed, type TenantEventBus, type TenantFeedHandle } from '@service-relay/tenant-events';
import { createVerifierClient, type VerifierClient } from '@service-relay/verifier-client';
import { WebSocketServer, type WebSocket } from 'ws';
import { defaultLimits, type RealtimeConfig } from './config';
import { ChannelRulesCache } from './authz/channel-rules-cache';
import type { ChannelRulesSource } from './authz/channel-rules-source';
import { RegistryRulesClient } from './grpc/registry-rules-client';
import { RegistryCallbacksClient } from './grpc/registry-callbacks-client';
import { createCallbackTransport } from './callbacks/callback-client';
import { CallbackDecider } from './callbacks/callback-decider';
import { CallbackSettingsCache, type CallbacksSource } from './callbacks/callback-settings-cache';
import { RegistryUsageClient } from '@service-relay/grpc';
import { createRestHandler } from './http/rest-api';
import { createLiveHandler, LIVE_PATH } from './http/live-api';
import { createServerApiHandler, SERVER_API_PREFIX, type PresenceLister } from './http/server-api';
import { createTenantConnections } from './limits/create-tenant-connections';
import { createTenantPublishRate } from './limits/create-tenant-publish-rate';
import { RegistryLimitsClient } from './limits/registry-limits-client';
import { TenantRefusals } from './limits/refusals';
import { fixedLimits, TenantLimitsCache, type LimitsSource, type TenantLimitsView } from './limits/tenant-limits-cache';
import type { TenantConnections, TenantSlot } from './limits/tenant-connections';
import { createMessageBus } from './messaging/create-message-bus';
import type { MessageBus } from './messaging/message-bus';
import { createRealtimeMetrics, type RealtimeMetrics } from './metrics';
import { createPresenceStore } from './presence/create-presence-store';
import { Presence } from './presence/presence';
import { isScheduler, timerScheduler } from './timers/scheduler';
import { TopicHub } from './topics/topic-hub';
import type { WebhookEventSink } from '@service-relay/webhook-events';
import { WebhookTransitions } from './webhooks/transitions';
import { WebhookInterest, type WebhookInterestSource } from './webhooks/webhook-interest';
import { RegistryWebhooksClient } from './grpc/registry-webhooks-client';
import { CLOSE_GOING_AWAY, CLOSE_TRY_AGAIN_LATER } from './ws/close-codes';

/** How long a client gets to answer the close handshake at shutdown (the process allows 10 s in all). */
const SHUTDOWN_GRACE_MS = 5000;
/** How long a tenant's first request waits for the registry's answer on its channel rules (then 503 unavailable). */
const RULES_DEADLINE_MS = 2000;
/** A usage flush not answered within this has failed (kept, sent again). */
const USAGE_FLUSH_DEADLINE_MS = 5000;
import { Connection } from './ws/connection';
import type { ConnectionContext } from './ws/connection-context';
import { ConnectionRegistry } from './ws/connection-registry';
import { CUT_OFF_REASON, FeedCutoff } from './ws/feed-cutoff';
import { Revocation } from './ws/revocation';
import { TenantPurge } from './purge/tenant-purge';
import { startPingSweep } from './ws/ping-sweep';
import { createUpgradeHandler } from './ws/upgrade-handler';

export interface RealtimeDeps {
  /** Tenant events; the launcher shares one bus across services. */
  bus?: TenantEventBus;
  /** Tests inject a ManualTenantFeed; otherwise realtime pulls from the registry. */
  feed?: TenantFeedHandle;
  /** Channels and history; defaults to Redis or in-process by REDIS_URL. */
  messages?: MessageBus;
  logger?: Logger;
  /** Token expiry runs on this; a ManualScheduler lets tests move time by hand. */
  clock?: Clock;
  verifier?: VerifierClient;
  /** Where a tenant's channel rules are asked for on first use; default: the registry's TenantFeed.ChannelRules. */
  channelRules?: ChannelRulesSource;
  /** Ping interval for dead-peer detection (default 30 s). */
  pingIntervalMs?: number;
  /** Lists a channel's presence for the host server API (#13); default: this server's own presence (cluster-wide). */
  presence?: PresenceLister;
  /** Tests inject one with an in-memory exporter; otherwise made from config.tracing (and shut down at stop). */
  tracing?: Tracing;
  /** MAX_CONNECTIONS_PER_TENANT's counter; default: on Redis or in this process by REDIS_URL. */
  tenantConnections?: TenantConnections;
  /**
   * Where usage flushes go (#30); default: the registry's Usage.Flush when
   * this server pulls its own tenant feed, else none (tests that inject a
   * feed have no registry): then nothing is metered.
   */
  usageSink?: UsageSink;
  /** The embedded default's hand-over of webhook events to the registry's sender (#32; the launcher shares one). */
  webhookEvents?: WebhookEventSink;
  /**
   * Where a tenant's limits are asked for on first use (#30); default: the
   * registry's TenantFeed.TenantLimits, or, when `channelRules` is injected
   * (a test without a registry), none: every tenant has the environment's limits.
   */
  limitsSource?: LimitsSource;
  /**
   * Where a tenant's callbacks are asked for on first use (#32); default: the
   * registry's TenantFeed.TenantCallbacks, or, when `channelRules` is injected
   * (a test without a registry), none: no tenant has callbacks.
   */
  callbacksSource?: CallbacksSource;
  /**
   * Where a tenant's wanted webhook events are asked for on first use (#32);
   * default: the registry's TenantFeed.TenantWebhooks, or, when `channelRules`
   * is injected (a test without a registry), none: every event is recorded.
   */
  webhookInterest?: WebhookInterestSource;
}

export interface RealtimeServer {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** The bound port once started. */
  readonly port: number;
  /** The ops listener's bound port once started: /healthz, /readyz, /metrics. */
  readonly opsPort: number;
  readonly metrics: RealtimeMetrics;
  /** Usage metering, when on (USAGE_METERING and a sink). */
  readonly usage: UsageMetering | undefined;
  /** Every refusal by a limit, per tenant (#30): usage metering listens here. */
  readonly refusals: TenantRefusals;
  /**
   * This server's `upgrade` listener, for a gateway in the same process
   * (`npm start`): it hands `/ws` upgrades over here instead of piping them
   * through a second socket (#34). The same checks as on realtime's own port.
   */
  readonly handleUpgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

/** HTTP + WebSocket on one port (/ws, the tenant REST API behind the gateway, /healthz), and the ops endpoints on another. */
export function createServer(config: Readonly<RealtimeConfig>, deps: RealtimeDeps = {}): RealtimeServer {
  const logger = deps.logger ?? createLogger({ service: 'realtime', level: config.logLevel });
  const clock = deps.clock;
  const scheduler = clock && isScheduler(clock) ? clock : timerScheduler(clock);
  const metrics = createRealtimeMetrics();
  const tracing = deps.tracing ?? startTracing('realtime', config.tracing);
  const ownsBus = !deps.bus;
  const events = deps.bus ?? createTenantEventBus(config.redis, logger);
  const ownsFeed = !deps.feed;
  const feed =
    deps.feed ?? createTenantFeed({ kind: 'realtime', registryAddr: config.tenantFeed.registryAddr, internalToken: config.internalToken, leaseMs: config.tenantFeed.leaseMs, bus: events, clock, logger });
  feed.addMetrics(metrics.registry, 'relay_realtime');
  const acceptingPublishes = () => feed.isCurrent();
  const ownsMessages = !deps.messages;
  const retention = { maxMessages: config.historyMaxMessages, ttlS: config.historyTtlS };
  const messages =
    deps.messages ?? createMessageBus(config.redis, {
      retention,
      historyDir: config.historyDir,
      idempotencyWindowS: config.idempotencyWindowS,
      pubsub: config.redisPubsub,
      logger,
      ...(clock && { clock }),
      onRedisError: (connection) => metrics.redisErrors.inc({ connection }),
    });
  const ownsVerifier = !deps.verifier;
  const verifier = deps.verifier ?? createVerifierClient({ address: config.verifierAddr, internalToken: config.internalToken, deadlineMs: config.verifyDeadlineMs, logger });
  // Webhook events (#32): member events from the presence store, occupancy and users' connections from two stores of the same kind,
  // recorded only for tenants whose enabled endpoints want them (learned through the tenant feed; counted for every tenant).
  const detecting = WebhookTransitions.detects(config.redis, config.webhookEvents, deps.webhookEvents);
  const ownsWebhookSource = detecting && !deps.webhookInterest && !deps.channelRules;
  const webhookSource = !detecting ? undefined : (deps.webhookInterest ?? (deps.channelRules ? undefined : new RegistryWebhooksClient({ address: config.tenantFeed.registryAddr, internalToken: config.internalToken, deadlineMs: RULES_DEADLINE_MS })));
  const webhookInterest = webhookSource && new WebhookInterest({ source: webhookSource, feed, logger });
  const memberEvents = WebhookTransitions.memberEvents(config.redis, config.webhookEvents, deps.webhookEvents, webhookInterest?.wants);
  const transitions = memberEvents && new WebhookTransitions(config.redis, { ttlMs: config.presenceTtlMs, scheduler, logger, sink: deps.webhookEvents, ...(webhookInterest && { wants: webhookInterest.wants }) });
  const registry = new ConnectionRegistry(verifier, metrics, feed, transitions);
  // Not current past its lease, this instance vouches for none of its connections: it closes them (1013) and takes none.
  const cutoff = new FeedCutoff({ isCurrent: () => feed.isCurrent(), registry, logger });
  const hub = new TopicHub(messages, metrics, cutoff.serving, transitions);
  const revocation = new Revocation(registry, logger);
  const ownsRulesSource = !deps.channelRules;
  const rulesSource = deps.channelRules ?? new RegistryRulesClient({ address: config.tenantFeed.registryAddr, internalToken: config.internalToken, deadlineMs: RULES_DEADLINE_MS });
  const channelRules = new ChannelRulesCache({ source: rulesSource, feed, logger });
  const tenantConnections = deps.tenantConnections ?? createTenantConnections(config.redis, { limit: config.maxConnectionsPerTenant, scheduler, logger });
  const presenceStore = createPresenceStore(config.redis, { ttlMs: config.presenceTtlMs, scheduler, logger, ...(memberEvents && { webhooks: memberEvents }) });
  const presence = new Presence(presenceStore, metrics, logger, cutoff.serving);
  // A deleted tenant's history, presence and counts go from wherever this instance keeps them (#30).
  const purge = new TenantPurge({
    purgers: [
      { name: 'history', purge: (t) => messages.purgeTenant(t) },
      { name: 'presence', purge: (t) => presenceStore.purgeTenant(t) },
      ...(transitions ? [{ name: 'webhook_transitions', purge: (t: string) => transitions.purgeTenant(t) }] : []),
      { name: 'connection_counts', purge: (t) => tenantConnections.forget(t) },
      { name: 'publish_rate', purge: (t) => tenantPublishes.forget(t) },
    ],
    logger,
    onOutcome: (outcome) => metrics.tenantPurges.inc({ outcome }),
  });
  // The registry's Usage.Flush when this server pulls its own feed (tests that inject a feed have no registry).
  const usageClient = !deps.usageSink && ownsFeed && config.usage.enabled ? new RegistryUsageClient({ address: config.tenantFeed.registryAddr, internalToken: config.internalToken, deadlineMs: USAGE_FLUSH_DEADLINE_MS, logger }) : undefined;
  const usage = startUsageMetering(config.usage, {
    service: 'realtime',
    metricsPrefix: 'relay_realtime',
    sink: deps.usageSink ?? (usageClient && ((flush) => usageClient.flush(flush))),
    ...(usageClient && { close: () => usageClient.close() }),
    registry: metrics.registry,
    logger,
  });
  const ownsLimitsSource = !deps.limitsSource && !deps.channelRules;
  const limitsSource = deps.limitsSource ?? (deps.channelRules ? undefined : new RegistryLimitsClient({ address: config.tenantFeed.registryAddr, internalToken: config.internalToken, deadlineMs: RULES_DEADLINE_MS }));
  const limitsCache = limitsSource && new TenantLimitsCache(defaultLimits(config), { source: limitsSource, feed, logger });
  const limits: TenantLimitsView = limitsCache ?? fixedLimits(defaultLimits(config));
  // Subscribe/publish callbacks (#32): asked of the host only for tenants that set them.
  const ownsCallbacksSource = !deps.callbacksSource && !deps.channelRules;
  const callbacksSource = deps.callbacksSource ?? (deps.channelRules ? undefined : new RegistryCallbacksClient({ address: config.tenantFeed.registryAddr, internalToken: config.internalToken, deadlineMs: RULES_DEADLINE_MS }));
  const callbackSettings = callbacksSource && new CallbackSettingsCache({ source: callbacksSource, feed, logger });
  const callbackTransport = callbackSettings && createCallbackTransport({ connectionsPerOrigin: config.callbacks.connectionsPerHost });
  const callbacks =
    callbackSettings && callbackTransport
      ? new CallbackDecider({ settings: callbackSettings, transport: callbackTransport, metrics, logger, allowHttp: config.callbacks.allowHttp, maxTtlS: config.callbacks.maxTtlS, maxEntries: config.callbacks.maxEntries, ...(clock && { clock }) })
      : undefined;
  const tenantPublishes = createTenantPublishRate(config.redis, { clock: scheduler, logger, syncMs: config.tenantRateSyncMs, onSync: (ok) => metrics.tenantRateSyncs.inc({ result: ok ? 'ok' : 'error' }) });
  const refusals = new TenantRefusals();
  // Usage metering counts every refusal by a limit, wherever it happened.
  if (usage) refusals.on((tenantId, limit) => usage.meter.refused(tenantId, limit));
  const connections = new Set<Connection>();
  const ctx: ConnectionContext = {
    hub,
    messages,
    registry,
    scheduler,
    metrics,
    logger,
    maxSubscriptions: config.maxSubscriptions,
    maxBufferedBytes: config.maxBufferedBytes,
    channelRules: channelRules.lookup,
    presence,
    publishRate: { ratePerS: config.publishRatePerS, burst: config.publishBurst },
    authFramesPerMinute: config.authFramesPerMinute,
    // Nothing is acknowledged while this instance cannot prove it has every
    // tenant change: a publish of a tenant revoked meanwhile must not count.
    acceptingPublishes,
    serving: cutoff.serving,
    live: connections,
    ...(usage && { usage: usage.meter }),
    limits,
    tenantPublishes,
    refusals,
    ...(callbacks && { callbacks }),
  };

  // ws closes a frame over maxPayload with 1009 itself; no compression keeps fan-out a plain write.
  const wss = new WebSocketServer({ noServer: true, maxPayload: config.maxFrameBytes, perMessageDeflate: false, clientTracking: false });
  const accept = (ws: WebSocket, identity: Connection['identity'], token: string, slot: TenantSlot, batch: BatchMode) => {
    // The lease ran out while the token was being checked: no `ready`, the client goes elsewhere.
    if (!cutoff.serving()) {
      slot.release();
      metrics.closed(CLOSE_TRY_AGAIN_LATER);
      ws.on('error', ignoreError);
      ws.close(CLOSE_TRY_AGAIN_LATER, CUT_OFF_REASON);
      return;
    }
    new Connection(ws, identity, token, ctx, slot, batch);
  };

  // The REST side continues the gateway's traceparent (ops and /ws plain requests are not traced).
  const rest = traceRequests(tracing, createRestHandler({ acceptedInternalTokens: config.acceptedInternalTokens, messages, metrics, logger, acceptingPublishes, channelRules: channelRules.lookup, presence, limits, tenantPublishes, refusals, usage: usage?.meter, ...(callbacks && { callbacks }) }));
  // The host server API's realtime side (#13), called by the registry only.
  const serverApi = createServerApiHandler({ acceptedInternalTokens: config.acceptedInternalTokens, messages, metrics, logger, acceptingPublishes, presence: deps.presence ?? presence.list, limits, tenantPublishes, refusals, usage: usage?.meter });
  // The registry's read of this instance for the operator console's Live page (GET /admin/live).
  const live = createLiveHandler({
    acceptedInternalTokens: config.acceptedInternalTokens,
    instanceId: (feed as Partial<{ consumerId: string }>).consumerId ?? `realtime-${process.pid}`,
    feedCurrent: () => feed.isCurrent(),
    registry,
    hub,
    presenceCount: async (ref) => (await presence.list(ref)).length,
    logger,
  });
  const readiness = {
    verifier: () => verifier.ready(),
    messages: () => messages.ready(),
    tenant_events: () => events.ready(),
    // Not current past its lease: out of the load balancer until it is (ARCHITECTURE.md "Tenant feed").
    tenant_feed: async () => feed.isCurrent(),
  };
  // /readyz and /metrics on a port of their own; this one answers them 404 (a client must not read them).
  const ops = createOpsServer({ metrics: metrics.registry, readiness });
  const server: Server = createHttpServer((req, res) => {
    // /healthz stays here: the gateway's readiness checks the port it forwards to, as a load balancer would.
    if (handleHealth(req, res)) return;
    if ((req.url ?? '').split('?', 1)[0] === '/ws') {
      // A plain request to the WebSocket path: it needs the upgrade.
      sendError(res, 'upgrade_required', { upgrade: 'websocket' });
      return;
    }
    if ((req.url ?? '').startsWith(SERVER_API_PREFIX)) return serverApi(req, res);
    if ((req.url ?? '').split('?', 1)[0] === LIVE_PATH) return live(req, res);
    rest(req, res);
  });
  // WebSockets keep their socket, so they count toward the caps for as long as they are open.
  guardConnections(server, config.connectionLimits, logger);
  const upgrade = traceUpgrades(tracing, createUpgradeHandler({ wss, registry, scheduler, metrics, logger, tenantConnections, limits, refusals, accept, ...(webhookInterest && { webhookInterest }) }));
  const handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (cutoff.serving()) return void upgrade(req, socket, head);
    // Cut off from the tenant feed: refused before any token is looked at (the client retries, elsewhere).
    metrics.upgrades.inc({ result: 'unavailable' });
    socket.on('error', ignoreError);
    socket.end(rawErrorResponse('unavailable'));
  };
  server.on('upgrade', handleUpgrade);

  let port = config.port;
  let opsPort = config.opsPort;
  let stopPings: (() => void) | undefined;
  const unsubscribers: (() => void)[] = [];

  return {
    metrics,
    usage,
    refusals,
    handleUpgrade,
    get port() {
      return port;
    },
    get opsPort() {
      return opsPort;
    },
    async start() {
      unsubscribers.push(feed.subscribe((e) => revocation.onEvent(e)));
      unsubscribers.push(feed.onReset(() => revocation.onReset()));
      // After Revocation: its handler closes the tenant's connections before this one starts.
      unsubscribers.push(feed.subscribe((e) => purge.onEvent(e)));
      // Rules changes are applied before the feed reports them, so an admin call's 200 means new requests obey them.
      unsubscribers.push(feed.subscribe((e) => channelRules.onEvent(e)));
      unsubscribers.push(feed.onReset(() => channelRules.onReset()));
      // Limits too (#30): a limits change is in force here before the feed reports it applied.
      if (limitsCache) {
        unsubscribers.push(feed.subscribe((e) => limitsCache.onEvent(e)));
        unsubscribers.push(feed.onReset(() => limitsCache.onReset()));
      }
      // Callbacks (#32): a change drops the tenant's settings (asked again) and every change forgets its cached answers, before it counts as applied.
      if (callbackSettings && callbacks) {
        unsubscribers.push(feed.subscribe((e) => callbackSettings.onEvent(e)));
        unsubscribers.push(feed.subscribe((e) => callbacks.onEvent(e)));
        unsubscribers.push(feed.onReset(() => callbackSettings.onReset()));
        unsubscribers.push(feed.onReset(() => callbacks.onReset()));
      }
      // Webhooks (#32): the event types a tenant's enabled endpoints want, in force before the change counts as applied.
      if (webhookInterest) {
        unsubscribers.push(feed.subscribe((e) => webhookInterest.onEvent(e)));
        unsubscribers.push(feed.onReset(() => webhookInterest.onReset()));
      }
      // Revocations must reach this instance from its first connection on; a
      // feed or bus that is not there yet is reported by /readyz, and until the
      // feed is current no publish is acknowledged.
      await Promise.all([feed.start(), withTimeout(events.ready(), 5000).catch(() => logger.warn('tenant event bus not ready at start; polling the tenant feed'))]);
      port = await listen(server, config.port, config.host);
      // Last: its /readyz 200 means the public port listens.
      opsPort = await listen(ops, config.opsPort, config.opsHost);
      stopPings = startPingSweep(connections, deps.pingIntervalMs ?? 30_000);
      cutoff.start();
      usage?.start();
      logger.info({ host: config.host, port, ops_host: config.opsHost, ops_port: opsPort, redis: config.redis.url !== undefined }, 'realtime listening');
    },
    async stop() {
      stopPings?.();
      cutoff.stop();
      for (const u of unsubscribers.splice(0)) u();
      // Stop accepting; every WebSocket gets to finish its close handshake
      // (1001: clients reconnect, to another instance if this one is going
      // away) before anything still open is cut.
      // Not ready from the first moment of the stop.
      const opsClosing = closeServer(ops, 1000);
      const closing = closeServer(server, SHUTDOWN_GRACE_MS + 1000);
      await Promise.all([...connections].map((c) => c.shutdown(CLOSE_GOING_AWAY, SHUTDOWN_GRACE_MS)));
      await Promise.all([closing, opsClosing]);
      // Whatever this instance still counts for its tenants is given back now, not one TTL later;
      // its presence members leave now too (each closed connection left already; this is the rest).
      // A purge of a deleted tenant still running finishes first (bounded: a failing one is left to the next DELETE).
      await withTimeout(purge.settled(), 2000).catch(() => logger.warn('a deleted tenant purge was still running at stop'));
      await Promise.all([tenantConnections.close(), presence.close(), tenantPublishes.close(), transitions?.close()]);
      if (ownsLimitsSource) limitsSource?.close();
      if (ownsCallbacksSource) callbacksSource?.close();
      if (ownsWebhookSource) webhookSource?.close();
      await callbackTransport?.close();
      // The final flush: every connection is closed (its time counted), the registry still answers (it stops after realtime).
      await usage?.stop();
      if (ownsVerifier) verifier.close();
      if (ownsRulesSource) rulesSource.close();
      if (ownsMessages) await messages.close();
      if (ownsFeed) feed.close();
      if (ownsBus) await events.close();
      if (!deps.tracing) await tracing.shutdown();
    },
  };
}

function ignoreError(): void {}
