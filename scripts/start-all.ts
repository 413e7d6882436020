/**
 * `npm start`: every service in one process. With DATABASE_URL and REDIS_URL
 * unset this is the embedded default (PGlite on disk under DATA_DIR, in-process
 * cache and bus); with them set, the same services use the real servers.
 */
import { resolve } from 'node:path';
import { createLogger, EnvReader, fillEmbeddedSecrets, readRedisSettings, runMain, type Env } from '@service-relay/core';
import { createTenantEventBus } from '@service-relay/tenant-events';
import { InProcessWebhookEvents } from '@service-relay/webhook-events';
import * as registry from '@service-relay/tenant-registry';
import * as verifier from '@service-relay/auth-verifier';
import * as realtime from '@service-relay/realtime';
import * as gateway from '@service-relay/edge-gateway';

interface Running {
  stop(): Promise<void>;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** True when the gateway's realtime list is only this process's realtime, on loopback. */
function namesThisRealtime(urls: readonly string[], port: number): boolean {
  if (urls.length !== 1) return false;
  const url = new URL(urls[0]!);
  return url.protocol === 'http:' && LOOPBACK.has(url.hostname) && Number(url.port || 80) === port;
}

async function main(): Promise<Running> {
  const env: Record<string, string | undefined> = { ...process.env };
  const dataDir = resolve(env.DATA_DIR || './.data');
  env.DATA_DIR = dataDir;

  let secretsNote = 'from the environment';
  const secrets = fillEmbeddedSecrets(env, dataDir);
  if (secrets) secretsNote = `${secrets.created ? 'generated into' : 'read from'} ${secrets.file}`;

  // In one process the peers are this process: a port moved by its variable
  // moves the address its callers use, unless that is set explicitly.
  const peers: Array<[peer: string, port: string, url: (port: string) => string]> = [
    ['REGISTRY_GRPC_ADDR', 'REGISTRY_GRPC_PORT', (p) => `127.0.0.1:${p}`],
    ['VERIFIER_ADDR', 'VERIFIER_GRPC_PORT', (p) => `127.0.0.1:${p}`],
    ['REGISTRY_URL', 'REGISTRY_HTTP_PORT', (p) => `http://127.0.0.1:${p}`],
    ['REALTIME_URL', 'REALTIME_PORT', (p) => `http://127.0.0.1:${p}`],
  ];
  for (const [peer, port, url] of peers) {
    const value = env[port];
    if (!env[peer] && value && value !== '0') env[peer] = url(value);
  }

  const frozen: Env = Object.freeze({ ...env });
  const reader = new EnvReader(frozen);
  const logger = createLogger({ service: 'launcher', level: reader.logLevel() });
  // One bus for every service in this process (in-process unless REDIS_URL is set).
  const bus = createTenantEventBus(readRedisSettings(reader), logger);
  // Without Redis, realtime hands webhook events to the registry's sender in this process (#32).
  const webhookEvents = env.REDIS_URL ? undefined : new InProcessWebhookEvents();
  const mode = { standalone: false };

  // Configs first, so a bad variable stops the process before anything listens.
  const configs = {
    registry: registry.loadConfig(frozen, mode),
    verifier: verifier.loadConfig(frozen, mode),
    realtime: realtime.loadConfig(frozen, mode),
    gateway: gateway.loadConfig(frozen, mode),
  };

  const started: Running[] = [];
  let realtimeServer: Running | undefined;
  const stopAll = async () => {
    // Realtime first: its "going away" (1001) reaches clients through the
    // gateway, whose WebSocket pipes are still open; then the rest, front to back.
    const order = realtimeServer ? [realtimeServer, ...started.reverse().filter((s) => s !== realtimeServer)] : started.reverse();
    for (const s of order) await s.stop().catch((err: unknown) => logger.error({ err }, 'stop failed'));
    await bus.close();
  };
  try {
    const reg = await registry.createServer(configs.registry, { bus, ...(webhookEvents && { webhookEvents }) });
    await reg.start();
    started.push(reg);
    const ver = await verifier.createServer(configs.verifier, { bus });
    await ver.start();
    started.push(ver);
    const rt = await realtime.createServer(configs.realtime, { bus, ...(webhookEvents && { webhookEvents: webhookEvents.push }) });
    await rt.start();
    started.push(rt);
    realtimeServer = rt;
    // The gateway's /ws goes to this realtime: hand each upgrade over in-process
    // rather than pipe it through a second socket (#34). REALTIME_URL naming
    // any other realtime (or several) keeps the pipe.
    const handoff = namesThisRealtime(configs.gateway.realtimeUrls, rt.port) ? rt.handleUpgrade : undefined;
    const gw = await gateway.createServer(configs.gateway, { bus, ...(handoff && { wsHandoff: handoff }) });
    await gw.start();
    started.push(gw);

    const storage = env.DATABASE_URL ? 'PostgreSQL from DATABASE_URL' : `embedded PostgreSQL in ${resolve(dataDir, 'pg')}`;
    const busNote = env.REDIS_URL ? 'Redis from REDIS_URL' : 'in-process cache and bus';
    // What is really bound: each listener's configured address (0.0.0.0 or :: means every interface).
    const at = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);
    const c = configs;
    process.stdout.write(
      [
        '',
        `service-relay is running (${storage}; ${busNote})`,
        `  edge-gateway     http://${at(c.gateway.host, gw.port)}          the one public origin: REST API, WebSocket on ws://${at(c.gateway.host, gw.port)}/ws, host API`,
        `  realtime         ws://${at(c.realtime.host, rt.port)}/ws         behind the gateway (its WebSocket also answers directly)`,
        `  tenant-registry  http://${at(c.registry.httpHost, reg.httpPort)}          admin API; gRPC key API on ${at(c.registry.grpcHost, reg.grpcPort)}`,
        `  auth-verifier    grpc ${at(c.verifier.grpcHost, ver.grpcPort)}          token checks for the gateway and realtime`,
        `  ops              /readyz and /metrics: gateway http://${at(c.gateway.opsHost, gw.opsPort)}, realtime http://${at(c.realtime.opsHost, rt.opsPort)}, registry http://${at(c.registry.opsHost, reg.opsPort)}, verifier http://${at(c.verifier.httpHost, ver.httpPort)}`,
        ...(c.registry.consoleDir ? [`  console          http://${at(c.registry.httpHost, reg.httpPort)}/console/  operator console (sign in with the admin token)`] : []),
        `  admin token      ADMIN_TOKEN ${secretsNote}`,
        '',
        'Next: npm run admin -- create-tenant     (Ctrl-C stops everything)',
        '',
      ].join('\n'),
    );
  } catch (err) {
    await stopAll();
    throw err;
  }
  return {
    stop: async () => {
      await stopAll();
      process.stdout.write('service-relay stopped cleanly\n');
    },
  };
}

await runMain(main);
