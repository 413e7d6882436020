import { afterAll, beforeAll } from 'vitest';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, type Clock, type Env } from '@service-relay/core';
import { capabilityJson } from '@service-relay/channels';
import { ManualTenantFeed, MemoryTenantEventBus, type TenantEventBus } from '@service-relay/tenant-events';
import { deleteRedisPrefix, FakeVerifier, TEST_REDIS_URL } from '@service-relay/testkit';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import { loadConfig, type RealtimeConfig } from '../config';
import type { MessageBus } from '../messaging/message-bus';
import { createServer, type RealtimeServer } from '../server';
import type { ChannelRulesSource } from '../authz/channel-rules-source';
import type { TenantConnections } from '../limits/tenant-connections';
import type { LimitsSource } from '../limits/tenant-limits-cache';
import type { WebhookEventSink } from '@service-relay/webhook-events';
import type { WebhookInterestSource } from '../webhooks/webhook-interest';
import { MemoryRulesSource } from './memory-rules-source';

export const TEST_INTERNAL_TOKEN = 'realtime-internal-token-for-tests-0123456789';

export interface RealtimeInstance {
  server: RealtimeServer;
  config: Readonly<RealtimeConfig>;
  http: string;
  /** The ops listener: /readyz and /metrics (the public `http` answers them 404). */
  ops: string;
  ws: string;
  /** The tenant feed, driven by hand: push a change, or take the lease away. */
  feed: ManualTenantFeed;
  /** Every log line, raw JSON. */
  logs: string[];
  stop(): Promise<void>;
}

export interface InstanceOptions {
  verifier: FakeVerifier;
  env?: Env;
  bus?: TenantEventBus;
  feed?: ManualTenantFeed;
  messages?: MessageBus;
  clock?: Clock;
  pingIntervalMs?: number;
  /** The tenants' channel rules as the registry would answer them; default: a MemoryRulesSource of this instance's own. */
  channelRules?: ChannelRulesSource;
  /** MAX_CONNECTIONS_PER_TENANT's counter; default: the one REDIS_URL picks. */
  tenantConnections?: TenantConnections;
  /** The tenants' limits as the registry would answer them (#30); default: none (every tenant has the environment's). */
  limitsSource?: LimitsSource;
  /** Where webhook events go without Redis (#32); default: none (nothing detected). */
  webhookEvents?: WebhookEventSink;
  /** The tenants' wanted webhook events as the registry would answer them; default: none (every event recorded). */
  webhookInterest?: WebhookInterestSource;
}

/** One realtime server on port 0 in front of a fake verifier. */
export async function startRealtime(opts: InstanceOptions): Promise<RealtimeInstance> {
  // The embedded history journal goes to a directory of this instance's own, removed at stop.
  const historyDir = opts.env?.HISTORY_DIR === undefined ? mkdtempSync(join(tmpdir(), 'relay-rt-history-')) : undefined;
  const config = loadConfig(
    { REALTIME_PORT: '0', REALTIME_OPS_PORT: '0', VERIFIER_ADDR: opts.verifier.address, INTERNAL_TOKEN: TEST_INTERNAL_TOKEN, LOG_LEVEL: 'debug', HISTORY_DIR: historyDir, ...opts.env },
    { standalone: false },
  );
  const logs: string[] = [];
  const logger = createLogger({ service: 'realtime', level: config.logLevel, destination: { write: (line: string) => void logs.push(line) } });
  const feed = opts.feed ?? new ManualTenantFeed();
  const server = createServer(config, {
    logger,
    feed,
    // With REDIS_URL the server opens its own Redis tenant-event bus, like a separate process would.
    ...(opts.bus ? { bus: opts.bus } : config.redis.url ? {} : { bus: new MemoryTenantEventBus() }),
    ...(opts.messages && { messages: opts.messages }),
    ...(opts.clock && { clock: opts.clock }),
    ...(opts.pingIntervalMs && { pingIntervalMs: opts.pingIntervalMs }),
    ...(opts.tenantConnections && { tenantConnections: opts.tenantConnections }),
    ...(opts.limitsSource && { limitsSource: opts.limitsSource }),
    ...(opts.webhookEvents && { webhookEvents: opts.webhookEvents }),
    ...(opts.webhookInterest && { webhookInterest: opts.webhookInterest }),
    channelRules: opts.channelRules ?? new MemoryRulesSource(),
  });
  await server.start();
  return {
    server,
    config,
    http: `http://127.0.0.1:${server.port}`,
    ops: `http://127.0.0.1:${server.opsPort}`,
    ws: `ws://127.0.0.1:${server.port}/ws`,
    feed,
    logs,
    stop: async () => {
      await server.stop();
      if (historyDir) rmSync(historyDir, { recursive: true, force: true });
    },
  };
}

/**
 * A FakeVerifier and one realtime instance for the enclosing describe block:
 * started before its tests, stopped after them.
 */
export function useRealtime(opts: Omit<InstanceOptions, 'verifier'> = {}): { verifier: FakeVerifier; readonly rt: RealtimeInstance } {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance | undefined;
  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ ...opts, verifier });
  });
  afterAll(async () => {
    await rt?.stop();
    await verifier.stop();
  });
  return {
    verifier,
    get rt() {
      if (!rt) throw new Error('useRealtime: the instance starts in beforeAll');
      return rt;
    },
  };
}

/** Registers a fresh token with the fake verifier and returns it. */
export function issueToken(verifier: FakeVerifier, identity: Partial<VerifiedIdentity> = {}): { token: string; identity: VerifiedIdentity } {
  const full: VerifiedIdentity = {
    tenantId: randomUUID(),
    userId: randomUUID(),
    expiresAt: Math.floor(Date.now() / 1000) + 3600,
    keySlot: 'primary',
    keyVersion: 1,
    ...identity,
  };
  const token = `tok-${randomUUID()}`;
  verifier.allow(token, full);
  return { token, identity: full };
}

export function topicFor(tenantId: string, channel: string): string {
  return `tenants/${tenantId}/channels/${channel}`;
}

/** Headers the gateway adds in front of the REST side. */
export function gatewayHeaders(identity: VerifiedIdentity, token = TEST_INTERNAL_TOKEN): Record<string, string> {
  return {
    'x-internal-token': token,
    'x-relay-tenant-id': identity.tenantId,
    'x-relay-user-id': identity.userId,
    'x-relay-expires-at': String(identity.expiresAt),
    ...(identity.cap !== undefined && { 'x-relay-cap': capabilityJson(identity.cap) }),
  };
}

/** Instances sharing one real Redis under `prefix` (as separate processes would), after starting the fake verifier. */
export async function startOnRedis(count: number, verifier: FakeVerifier, prefix: string, clock?: Clock, channelRules?: ChannelRulesSource): Promise<RealtimeInstance[]> {
  await verifier.start();
  const env = { REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix };
  return Promise.all(Array.from({ length: count }, () => startRealtime({ verifier, env, ...(clock && { clock }), ...(channelRules && { channelRules }) })));
}

/** Undoes startOnRedis: the instances, the verifier and every Redis key under `prefix`. */
export async function stopOnRedis(instances: RealtimeInstance[], verifier: FakeVerifier, prefix: string): Promise<void> {
  await Promise.all(instances.map((rt) => rt.stop()));
  await verifier.stop();
  await deleteRedisPrefix(prefix);
}
