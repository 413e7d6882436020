import { randomBytes } from 'node:crypto';
import { createTestDatabase, deleteRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix, type TestDatabase } from '@service-relay/testkit';
import { runAdminCli } from '../../services/tenant-registry/src/cli/commands';
import { freePort, ManagedProcess, runCommand, waitForHttp } from './processes';

export interface Stack {
  adminToken: string;
  internalToken: string;
  secretsKey: string;
  gatewayUrl: string;
  registryUrl: string;
  /** The stack's own PostgreSQL database and Redis key prefix (a test reads what the services stored). */
  databaseUrl: string;
  redisPrefix: string;
  /** ws://…/ws of each realtime instance. */
  realtimeWs: string[];
  processes: Record<string, ManagedProcess>;
  /**
   * GET /healthz of every service's ops listener, by process name: it listens
   * last, so it answering means the service is up. Its /readyz and /metrics
   * are beside it (`.replace('/healthz', '/metrics')`); the public ports answer those 404.
   */
  health: Record<string, string>;
  /** Starts a stopped service again and waits until it is healthy. */
  restart(name: string): Promise<void>;
  /**
   * Runs the admin CLI's command code (argument parsing, the admin call, what
   * it prints, its exit code) in this process: a spawned CLI costs ~2 s of
   * CPU to start, and the suites make dozens of calls.
   */
  admin(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** Runs the admin CLI exactly as an operator would: `node admin-cli.ts`, its own process. */
  adminProcess(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  allLogs(): string;
  stop(): Promise<void>;
}

const TSX = ['--import', 'tsx'];

async function adminInProcess(registryUrl: string, adminToken: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runAdminCli(args, { registryUrl, adminToken, secretsFile: '(ADMIN_TOKEN is set)', workDir: process.cwd() }, {
    out: (text) => (stdout += `${text}\n`),
    err: (text) => (stderr += `${text}\n`),
    stdin: { isTTY: false, read: () => Promise.resolve('') },
  });
  return { code, stdout, stderr };
}

export interface StackOptions {
  /** The gateway sends REST requests and WebSocket upgrades to both realtime instances in turn (default: realtime1 only). */
  gatewayToBothRealtimes?: boolean;
  /** Extra environment of the gateway (e.g. CORS_ORIGINS). */
  gatewayEnv?: Record<string, string>;
  /** Extra environment of the registry (e.g. REALTIME_URL naming both instances). */
  registryEnv?: Record<string, string> | ((ports: { realtime: number[] }) => Record<string, string>);
  /** Extra environment of both realtime instances (e.g. TENANT_RATE_SYNC_MS), or of realtime1 and realtime2 in that order. */
  realtimeEnv?: Record<string, string> | [Record<string, string>, Record<string, string>];
  /** Extra environment by process name (registry, verifier1, verifier2, realtime1, realtime2, gateway), applied last. */
  serviceEnv?: Record<string, Record<string, string>>;
}

/**
 * The distributed deployment on this machine: every service its own process,
 * two auth-verifiers and two realtime instances, on a fresh PostgreSQL database
 * and a Redis key prefix of their own.
 */
export async function startStack(opts: StackOptions = {}): Promise<Stack> {
  const db: TestDatabase = await createTestDatabase('e2e');
  const adminToken = randomBytes(32).toString('base64url');
  const internalToken = randomBytes(32).toString('base64url');
  const secretsKey = randomBytes(32).toString('base64');
  const ports = {
    registryHttp: await freePort(),
    registryGrpc: await freePort(),
    verifierGrpc: [await freePort(), await freePort()],
    verifierHttp: [await freePort(), await freePort()],
    realtime: [await freePort(), await freePort()],
    gateway: await freePort(),
    // The ops listeners (/healthz, /readyz, /metrics); the verifier's is its HTTP port.
    registryOps: await freePort(),
    realtimeOps: [await freePort(), await freePort()],
    gatewayOps: await freePort(),
  };
  const redisPrefix = uniqueRedisPrefix('e2e');
  const common = {
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: redisPrefix,
    ADMIN_TOKEN: adminToken,
    INTERNAL_TOKEN: internalToken,
    SECRETS_KEY: secretsKey,
    LOG_LEVEL: 'info',
  };
  const procs: Record<string, ManagedProcess> = {};
  const health: Record<string, string> = {};
  const add = (name: string, service: string, env: Record<string, string>, healthUrl: string) => {
    procs[name] = new ManagedProcess(name, process.execPath, [...TSX, `services/${service}/src/main.ts`], { ...common, ...env, ...opts.serviceEnv?.[name] });
    health[name] = healthUrl;
  };
  // The host server API's publish and presence go to realtime2, so the gateway (realtime1) and the registry use different instances.
  add('registry', 'tenant-registry', { ...db.registryEnv, REGISTRY_HTTP_PORT: `${ports.registryHttp}`, REGISTRY_GRPC_PORT: `${ports.registryGrpc}`, REGISTRY_OPS_PORT: `${ports.registryOps}`, REALTIME_URL: `http://127.0.0.1:${ports.realtime[1]}`, VERIFIER_ADDR: `127.0.0.1:${ports.verifierGrpc[1]}`, ...(typeof opts.registryEnv === 'function' ? opts.registryEnv(ports) : opts.registryEnv) }, `http://127.0.0.1:${ports.registryOps}/healthz`);
  for (const i of [0, 1]) {
    add(`verifier${i + 1}`, 'auth-verifier', { VERIFIER_GRPC_PORT: `${ports.verifierGrpc[i]}`, VERIFIER_HTTP_PORT: `${ports.verifierHttp[i]}`, REGISTRY_GRPC_ADDR: `127.0.0.1:${ports.registryGrpc}` }, `http://127.0.0.1:${ports.verifierHttp[i]}/healthz`);
  }
  for (const i of [0, 1]) {
    add(`realtime${i + 1}`, 'realtime', { REALTIME_PORT: `${ports.realtime[i]}`, REALTIME_OPS_PORT: `${ports.realtimeOps[i]}`, VERIFIER_ADDR: `127.0.0.1:${ports.verifierGrpc[i]}`, REGISTRY_GRPC_ADDR: `127.0.0.1:${ports.registryGrpc}`, ...(Array.isArray(opts.realtimeEnv) ? opts.realtimeEnv[i] : opts.realtimeEnv) }, `http://127.0.0.1:${ports.realtimeOps[i]}/healthz`);
  }
  add('gateway', 'edge-gateway', {
    GATEWAY_PORT: `${ports.gateway}`,
    GATEWAY_OPS_PORT: `${ports.gatewayOps}`,
    // Tests send refused tokens from one address by the hundred; the budget is tested in tests/faults/overload.test.ts.
    REFUSED_AUTH_BURST: '1000000',
    REFUSED_AUTH_RATE_LIMIT: '1000000',
    VERIFIER_ADDR: `127.0.0.1:${ports.verifierGrpc[0]}`,
    REGISTRY_GRPC_ADDR: `127.0.0.1:${ports.registryGrpc}`,
    REGISTRY_URL: `http://127.0.0.1:${ports.registryHttp}`,
    REALTIME_URL: (opts.gatewayToBothRealtimes ? ports.realtime : ports.realtime.slice(0, 1)).map((p) => `http://127.0.0.1:${p}`).join(','),
    ...opts.gatewayEnv,
  }, `http://127.0.0.1:${ports.gatewayOps}/healthz`);

  const startOne = async (name: string) => {
    const p = procs[name]!;
    p.start();
    await waitForHttp(health[name]!, 30_000, p);
  };
  const stopAll = async () => {
    await Promise.all(Object.values(procs).map((p) => p.stop()));
    await db.drop();
    await deleteRedisPrefix(redisPrefix);
  };
  try {
    // Every process at once (the consumers retry the registry until it answers, as after any
    // restart), then each one's /readyz: its dependencies wired. One phase after the other cost
    // a whole-stack file about 3 s more on two cores.
    await Promise.all(Object.keys(procs).map(startOne));
    await Promise.all(Object.keys(procs).map((n) => waitForHttp(health[n]!.replace(/\/healthz$/, '/readyz'), 30_000, procs[n])));
  } catch (err) {
    await stopAll();
    throw err;
  }

  const registryUrl = `http://127.0.0.1:${ports.registryHttp}`;
  return {
    adminToken,
    internalToken,
    secretsKey,
    gatewayUrl: `http://127.0.0.1:${ports.gateway}`,
    registryUrl,
    databaseUrl: db.url,
    redisPrefix,
    realtimeWs: ports.realtime.map((p) => `ws://127.0.0.1:${p}/ws`),
    processes: procs,
    health,
    restart: startOne,
    admin: (...args: string[]) => adminInProcess(registryUrl, adminToken, args),
    adminProcess: (...args: string[]) => runCommand(process.execPath, [...TSX, 'services/tenant-registry/src/cli/admin-cli.ts', ...args], { REGISTRY_URL: registryUrl, ADMIN_TOKEN: adminToken }),
    allLogs: () => Object.values(procs).map((p) => p.logs).join('\n'),
    stop: stopAll,
  };
}
