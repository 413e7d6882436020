import { randomBytes } from 'node:crypto';
import type { InProcessWebhookEvents } from '@service-relay/webhook-events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, type Clock } from '@service-relay/core';
import { createTenantFeed, MemoryTenantEventBus, type TenantEvent, type TenantEventBus, type TenantFeed } from '@service-relay/tenant-events';
import { loadConfig, type RegistryConfig } from '../config';
import { createServer, type RegistryServer } from '../server';

export interface TestRegistry {
  server: RegistryServer;
  config: RegistryConfig;
  baseUrl: string;
  /** The ops listener: /readyz and /metrics (baseUrl answers them 404). */
  opsUrl: string;
  dataDir: string;
  adminToken: string;
  internalToken: string;
  bus: TenantEventBus;
  /** A tenant feed consumer of this registry, as a service runs one; admin calls wait for it. */
  feed: TenantFeed;
  /** Every change the feed consumer applied so far, in order. */
  events: TenantEvent[];
  /** Another feed consumer of this registry (the caller closes it). */
  consumer(leaseMs?: number): Promise<TenantFeed>;
  /** Everything logged so far (JSON lines). */
  logs(): string;
  /** An admin call with the right token unless headers say otherwise. */
  admin(method: string, path: string, init?: { headers?: Record<string, string>; body?: string }): Promise<Response>;
  /** A new server on the same data directory and secrets (a restart). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface TestRegistryOptions {
  env?: Record<string, string>;
  /** Start on this data directory (another test registry's, stopped): stop() then leaves it in place. */
  dataDir?: string;
  bus?: TenantEventBus;
  clock?: Clock;
  logLevel?: string;
  /** Webhook events as realtime in the same process would hand them over (#32); default: none. */
  webhookEvents?: InProcessWebhookEvents;
}

/** A registry on a temporary PGlite directory, ports 0, logs captured, an in-memory bus. */
export async function startTestRegistry(opts: TestRegistryOptions = {}): Promise<TestRegistry> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'registry-test-'));
  const adminToken = randomBytes(32).toString('base64url');
  const internalToken = randomBytes(32).toString('base64url');
  const config = loadConfig({
    REGISTRY_HTTP_PORT: '0',
    REGISTRY_GRPC_PORT: '0',
    REGISTRY_OPS_PORT: '0',
    DATA_DIR: dataDir,
    ADMIN_TOKEN: adminToken,
    INTERNAL_TOKEN: internalToken,
    SECRETS_KEY: randomBytes(32).toString('base64'),
    LOG_LEVEL: opts.logLevel ?? 'debug',
    ...opts.env,
  });
  const lines: string[] = [];
  const logger = createLogger({ service: 'tenant-registry', level: config.logLevel, destination: { write: (s: string) => void lines.push(s) } });
  const bus = opts.bus ?? new MemoryTenantEventBus();
  const events: TenantEvent[] = [];
  const consumer = async (leaseMs = 2000) => {
    const f = createTenantFeed({ kind: 'test-consumer', registryAddr: `127.0.0.1:${t.server.grpcPort}`, internalToken, leaseMs, bus, logger });
    await f.start();
    return f;
  };
  const make = () => createServer(config, { bus, logger, ...(opts.clock ? { clock: opts.clock } : {}), ...(opts.webhookEvents && { webhookEvents: opts.webhookEvents }) });
  const t: TestRegistry = {
    server: make(),
    config,
    baseUrl: '',
    opsUrl: '',
    dataDir,
    adminToken,
    internalToken,
    bus,
    feed: undefined as unknown as TenantFeed,
    events,
    consumer,
    logs: () => lines.join(''),
    admin: (method, path, init = {}) =>
      fetch(`${t.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, ...init.headers },
        ...(init.body !== undefined ? { body: init.body } : {}),
      }),
    async restart() {
      t.feed.close();
      await t.server.stop();
      t.server = make();
      await t.server.start();
      t.baseUrl = `http://127.0.0.1:${t.server.httpPort}`;
      t.opsUrl = `http://127.0.0.1:${t.server.opsPort}`;
      await follow();
    },
    async stop() {
      t.feed.close();
      await t.server.stop();
      await bus.close();
      if (opts.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  const follow = async () => {
    t.feed = await consumer();
    t.feed.subscribe((e) => void events.push(e));
  };
  await t.server.start();
  t.baseUrl = `http://127.0.0.1:${t.server.httpPort}`;
  t.opsUrl = `http://127.0.0.1:${t.server.opsPort}`;
  await follow();
  return t;
}
