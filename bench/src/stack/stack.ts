import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRedis, redisReady } from '@service-relay/core';
import { adminCall, createTenantThrough } from '../lib/admin';
import { startEmbedded, type Embedded } from '../lib/embedded';
import type { TenantKey } from '../lib/tokens';
import { onHardExit, startWorker, type WorkerHandle } from '../lib/workers';
import type { ServiceName } from '../workers/service-host';

/**
 * The real services, each in its own process as in a deployment (so each
 * figure can say whose CPU limited it), sharing one Redis under a prefix of
 * their own, with an embedded PGlite registry in a temporary DATA_DIR.
 */
export interface Stack {
  key: TenantKey;
  env: Record<string, string>;
  adminToken: string;
  internalToken: string;
  registryHttp: string;
  verifierAddr: string;
  realtimeHttp: string;
  realtimeWs: string;
  gatewayUrl: string;
  workers: { registry: WorkerHandle; verifier: WorkerHandle; realtime: WorkerHandle; gateway: WorkerHandle };
  /** Another realtime instance on the same Redis and verifier (stopped by the caller). */
  startRealtime(label: string, nodeFlags?: string[], extraEnv?: Record<string, string>): Promise<{ worker: WorkerHandle; http: string; ws: string }>;
  admin(path: string, method?: string): Promise<Record<string, unknown>>;
  /** A new tenant through the admin API, its secret fetched through the gateway. */
  createTenant(): Promise<TenantKey>;
  /**
   * The one origin a README user connects to (#34): `npm start` in a worker
   * of its own (every service in one process, in-process bus, PGlite) with a
   * tenant of its own, started on first use and shared by the scenarios.
   */
  oneOrigin(): Promise<OneOrigin>;
  stop(): Promise<void>;
}

export interface OneOrigin {
  /** The process serving it all (its CPU and RSS are the origin's). */
  host: WorkerHandle;
  /** ws://…:GATEWAY_PORT (the gateway hands /ws upgrades to realtime in its process). */
  gatewayWs: string;
  key: TenantKey;
}

export interface StackOptions {
  redisUrl: string;
  log(message: string): void;
}

const pick = (ports: Record<string, number>, names: string[], what: string): number => {
  for (const n of names) if (typeof ports[n] === 'number' && ports[n]! > 0) return ports[n]!;
  throw new Error(`${what}: no bound port among ${JSON.stringify(ports)}`);
};

/** A service-host worker with the service's code already imported (not started yet). */
async function loadService(service: ServiceName, label: string, nodeFlags: string[] = []): Promise<WorkerHandle> {
  const worker = await startWorker('service-host', { label, nodeFlags });
  try {
    await worker.call('load', { service }, 60_000);
    return worker;
  } catch (err) {
    await worker.stop(1000);
    throw err;
  }
}

async function startService(worker: WorkerHandle, service: ServiceName, env: Record<string, string>): Promise<Record<string, number>> {
  return worker.call<Record<string, number>>('start', { service, env }, 60_000);
}

export async function checkRedis(url: string): Promise<void> {
  const redis = createRedis(url, { lazyConnect: true, retryStrategy: () => null });
  try {
    await redis.connect();
    await redisReady(redis, 3000);
  } catch (err) {
    throw new Error(`the bench needs Redis at ${url} (set REDIS_URL): ${(err as Error).message}`);
  } finally {
    redis.disconnect();
  }
}

async function dropPrefix(url: string, prefix: string): Promise<void> {
  const redis = createRedis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await redisReady(redis, 3000);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** An admin API call to a registry; a non-2xx answer throws with its body. */
const ORIGIN_LIMITS = ['MAX_CONNECTIONS_PER_ADDRESS', 'PUBLISH_RATE_PER_S', 'PUBLISH_BURST', 'MAX_CONNECTIONS_PER_TENANT', 'TENANT_PUBLISH_RATE_PER_S', 'TENANT_PUBLISH_BURST', 'HISTORY_TTL_S'];
const pickEnv = (env: Record<string, string>, names: string[]) => Object.fromEntries(names.filter((n) => env[n] !== undefined).map((n) => [n, env[n]!]));

export async function startStack(opts: StackOptions): Promise<Stack> {
  await checkRedis(opts.redisUrl);
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-'));
  // stop() also deletes the Redis prefix; the PGlite directory must go on every exit path.
  const removeDataDir = () => rmSync(dataDir, { recursive: true, force: true });
  const dropHook = onHardExit(removeDataDir);
  const prefix = `bench:${randomBytes(6).toString('hex')}:`;
  const adminToken = randomBytes(32).toString('base64url');
  const internalToken = randomBytes(32).toString('base64url');
  const env: Record<string, string> = {
    REDIS_URL: opts.redisUrl,
    REDIS_PREFIX: prefix,
    ADMIN_TOKEN: adminToken,
    INTERNAL_TOKEN: internalToken,
    SECRETS_KEY: randomBytes(32).toString('base64'),
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    HOST_FETCH_RATE_LIMIT: '1000',
    HISTORY_TTL_S: '600',
    REGISTRY_HTTP_PORT: '0',
    REGISTRY_GRPC_PORT: '0',
    VERIFIER_GRPC_PORT: '0',
    VERIFIER_HTTP_PORT: '0',
    REALTIME_PORT: '0',
    GATEWAY_PORT: '0',
    // The ops listeners (/readyz, /metrics) too: fixed defaults would collide between instances.
    REGISTRY_OPS_PORT: '0',
    REALTIME_OPS_PORT: '0',
    GATEWAY_OPS_PORT: '0',
    // Every bench client connects from loopback; the per-address cap would refuse them past 1000.
    MAX_CONNECTIONS_PER_ADDRESS: '19000',
    // One tenant's publisher saturates the server and its clients fill it: the
    // per-connection publish rate and the per-tenant connection count stay on
    // (their cost is measured) with bounds the load never reaches.
    PUBLISH_RATE_PER_S: '1000000',
    PUBLISH_BURST: '1000000',
    MAX_CONNECTIONS_PER_TENANT: '10000000',
    // The cluster-wide tenant publish rate (#30) too (its largest allowed): its default, 10,000/s, is below what one publisher reaches here.
    TENANT_PUBLISH_RATE_PER_S: '1000000',
    TENANT_PUBLISH_BURST: '1000000',
  };
  const loading = [
    loadService('tenant-registry', 'registry'),
    loadService('auth-verifier', 'verifier'),
    loadService('realtime', 'realtime'),
    loadService('edge-gateway', 'gateway'),
  ] as const;
  let origin: Promise<{ one: Embedded; key: TenantKey }> | undefined;
  const stop = async () => {
    const one = await origin?.catch(() => undefined);
    await one?.one.stop();
    const settled = await Promise.allSettled(loading);
    // Reverse order: gateway first, registry last.
    await Promise.all(settled.reverse().map((s) => (s.status === 'fulfilled' ? s.value.stop(5000) : undefined)));
    await dropPrefix(opts.redisUrl, prefix).catch((err: unknown) => opts.log(`could not clean Redis prefix ${prefix}: ${(err as Error).message}`));
    removeDataDir();
    dropHook();
  };
  try {
    const [registryWorker, verifierWorker, realtimeWorker, gatewayWorker] = await Promise.all(loading);
    const registryPorts = await startService(registryWorker, 'tenant-registry', env);
    const registryHttp = `http://127.0.0.1:${pick(registryPorts, ['httpPort'], 'registry http')}`;
    env.REGISTRY_URL = registryHttp;
    env.REGISTRY_GRPC_ADDR = `127.0.0.1:${pick(registryPorts, ['grpcPort'], 'registry grpc')}`;

    const verifierPorts = await startService(verifierWorker, 'auth-verifier', env);
    const verifierAddr = `127.0.0.1:${pick(verifierPorts, ['grpcPort'], 'verifier grpc')}`;
    env.VERIFIER_ADDR = verifierAddr;

    const realtimeUrls = async (worker: WorkerHandle, extraEnv: Record<string, string> = {}) => {
      const port = pick(await startService(worker, 'realtime', { ...env, ...extraEnv }), ['port', 'httpPort'], 'realtime');
      return { worker, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}` };
    };
    const startRealtime = async (label: string, nodeFlags: string[] = [], extraEnv: Record<string, string> = {}) => {
      const worker = await loadService('realtime', label, nodeFlags);
      try {
        return await realtimeUrls(worker, extraEnv);
      } catch (err) {
        await worker.stop(1000);
        throw err;
      }
    };
    const realtime = await realtimeUrls(realtimeWorker);
    env.REALTIME_URL = realtime.http;

    const gatewayPorts = await startService(gatewayWorker, 'edge-gateway', env);
    const gatewayUrl = `http://127.0.0.1:${pick(gatewayPorts, ['port', 'httpPort'], 'gateway')}`;

    const admin = (path: string, method = 'POST') => adminCall(registryHttp, adminToken, path, method);
    const createTenant = () => createTenantThrough(registryHttp, gatewayUrl, adminToken);
    const key = await createTenant();
    opts.log(`stack up: registry, verifier, realtime, gateway (Redis prefix ${prefix})`);
    return {
      key,
      env,
      adminToken,
      internalToken,
      registryHttp,
      verifierAddr,
      realtimeHttp: realtime.http,
      realtimeWs: realtime.ws,
      gatewayUrl,
      workers: { registry: registryWorker, verifier: verifierWorker, realtime: realtimeWorker, gateway: gatewayWorker },
      startRealtime,
      admin,
      createTenant,
      oneOrigin: async () => {
        // The deployed stack's limits (per-address cap, publish rates), so both paths are held to the same bounds.
        origin ??= startEmbedded((name, o) => startWorker(name, o), 'one-origin', pickEnv(env, ORIGIN_LIMITS)).then(async (one) => ({ one, key: await one.createTenant() }));
        const { one, key } = await origin;
        return { host: one.host, gatewayWs: one.gatewayWs, key };
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
