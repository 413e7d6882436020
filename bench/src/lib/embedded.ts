import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freeLoopbackPort } from '@service-relay/testkit';
import { adminCall, createTenantThrough } from './admin';
import type { TenantKey } from './tokens';
import { onHardExit, type StartOptions, type WorkerHandle } from './workers';

/**
 * `npm start` in a worker of its own (workers/embedded-host.ts): every
 * service in one process, the in-process bus, PGlite in a temporary DATA_DIR.
 * `gatewayWs` is the one origin a README user connects to: the gateway hands
 * each /ws upgrade to realtime in the same process (#34).
 */
export interface Embedded {
  host: WorkerHandle;
  /** ws://…:GATEWAY_PORT: the one public origin. */
  gatewayWs: string;
  /** ws://…:REALTIME_PORT: realtime's own port, which also answers. */
  realtimeWs: string;
  gatewayUrl: string;
  createTenant(): Promise<TenantKey>;
  admin(path: string): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

const PORTS = ['REGISTRY_HTTP_PORT', 'REGISTRY_GRPC_PORT', 'VERIFIER_GRPC_PORT', 'VERIFIER_HTTP_PORT', 'REALTIME_PORT', 'GATEWAY_PORT', 'REGISTRY_OPS_PORT', 'REALTIME_OPS_PORT', 'GATEWAY_OPS_PORT'] as const;

export async function startEmbedded(spawn: (name: string, opts?: StartOptions) => Promise<WorkerHandle>, label: string, extraEnv: Record<string, string> = {}): Promise<Embedded> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-embedded-'));
  const removeDataDir = () => rmSync(dataDir, { recursive: true, force: true });
  const dropHook = onHardExit(removeDataDir);
  let host: WorkerHandle | undefined;
  const stop = async () => {
    try {
      await host?.stop(5000);
    } finally {
      removeDataDir();
      dropHook();
    }
  };
  try {
    const ports: Record<string, number> = {};
    for (const name of PORTS) ports[name] = await freeLoopbackPort();
    const adminToken = randomBytes(32).toString('base64url');
    const env = {
      ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])),
      DATA_DIR: dataDir,
      ADMIN_TOKEN: adminToken,
      INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
      SECRETS_KEY: randomBytes(32).toString('base64'),
      LOG_LEVEL: 'warn',
      HOST_FETCH_RATE_LIMIT: '1000',
      PUBLISH_RATE_PER_S: '1000000',
      PUBLISH_BURST: '1000000',
      ...extraEnv,
    };
    host = await spawn('embedded-host', { label });
    await host.call('start', { env }, 120_000);
    const registryHttp = `http://127.0.0.1:${ports.REGISTRY_HTTP_PORT}`;
    const gatewayUrl = `http://127.0.0.1:${ports.GATEWAY_PORT}`;
    return {
      host,
      gatewayWs: `ws://127.0.0.1:${ports.GATEWAY_PORT}`,
      realtimeWs: `ws://127.0.0.1:${ports.REALTIME_PORT}`,
      gatewayUrl,
      createTenant: () => createTenantThrough(registryHttp, gatewayUrl, adminToken),
      admin: (path) => adminCall(registryHttp, adminToken, path),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
