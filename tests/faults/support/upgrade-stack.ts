import { randomBytes } from 'node:crypto';
import { freePort, ManagedProcess, REPO_ROOT, waitForHttp } from '../../support/processes';
import { PrivatePostgres, PrivateRedis, track } from './backends';
import { TcpService } from './tcp-service';

/** The Deployments of deploy/kubernetes/base, two replicas each, in the order a rolling upgrade takes them. */
export const PODS = ['registry-0', 'registry-1', 'verifier-0', 'verifier-1', 'gateway-0', 'gateway-1', 'realtime-0', 'realtime-1'] as const;
export type PodName = (typeof PODS)[number];

/** Where a pod's code comes from: a checkout (its services run with it as the working directory, through its own tsx). */
export interface Build {
  /** Named in logs and steps, e.g. `0.1.0` or `current`. */
  label: string;
  dir: string;
  /**
   * Where its manifests probe /readyz (and Prometheus scrapes): the ops
   * listener (0.2.0 on), or the public/admin port (0.1.0, before the ops
   * listeners). The verifier's HTTP port in every build.
   */
  opsOn: 'ops' | 'public';
}

/** This checkout. */
export const CURRENT_BUILD: Build = { label: 'current', dir: REPO_ROOT, opsOn: 'ops' };

interface Pod {
  service: string;
  proc: ManagedProcess;
  /** The build the pod runs (or will run at its next start). */
  build: Build;
  /** Output of the pod's processes before the current one (an upgrade starts a new process). */
  pastLogs: string;
  /** The ops listener (/healthz, /readyz, /metrics): what the kubelet probes and Prometheus scrapes. */
  opsPort: number;
  /** The Service ports this pod is an endpoint of: [service, the pod's own port]. */
  endpoints: Array<[TcpService, number]>;
}

export interface RestartStep {
  pod: PodName;
  /** The build before and after the step (the same for a plain restart). */
  from: string;
  to: string;
  /** SIGTERM until exit. */
  stopMs: number;
  /** start until /readyz 200. */
  startMs: number;
  exitCode: number | null;
}

/**
 * The manifests' deployment as processes: two replicas of every service, and
 * in front of each one a TcpService standing in for its Kubernetes Service
 * (registry HTTP and gRPC, verifier gRPC, realtime, gateway). Peers reach
 * each other only through those, as the ConfigMap's addresses do; clients
 * reach the gateway's and realtime's Services. A private Redis (AOF) and
 * PostgreSQL. Every pod runs one build; restart(pod, build) moves it to
 * another, as a rollout of a new image does (tests/faults/rolling-upgrade:
 * from the previous release to this checkout).
 */
export class UpgradeStack {
  readonly adminToken = randomBytes(32).toString('base64url');
  readonly internalToken = randomBytes(32).toString('base64url');
  readonly secretsKey = randomBytes(32).toString('base64');
  readonly pods = {} as Record<PodName, Pod>;
  readonly steps: RestartStep[] = [];

  private constructor(
    readonly redis: PrivateRedis,
    readonly postgres: PrivatePostgres,
    readonly svc: { registryHttp: TcpService; registryGrpc: TcpService; verifier: TcpService; realtime: TcpService; gateway: TcpService },
    private readonly env: Record<string, string>,
    private readonly build: Build,
  ) {}

  /**
   * `env`: more environment for every pod (e.g. a shorter KEY_CACHE_TTL_S);
   * `build`: what every pod starts from (default this checkout), or a
   * promise of it (the backends start meanwhile; a rejection stops them).
   */
  static async start(opts: { env?: Record<string, string>; build?: Build | Promise<Build> } = {}): Promise<UpgradeStack> {
    // The backends start while the build (a promise: e.g. another release being installed) is made.
    const [redisR, postgresR, buildR] = await Promise.allSettled([PrivateRedis.start({ persistent: true }), PrivatePostgres.start(), Promise.resolve(opts.build ?? CURRENT_BUILD)]);
    if (redisR.status === 'rejected' || postgresR.status === 'rejected' || buildR.status === 'rejected') {
      await Promise.all([redisR.status === 'fulfilled' ? redisR.value.stop() : undefined, postgresR.status === 'fulfilled' ? postgresR.value.destroy() : undefined]);
      throw [redisR, postgresR, buildR].flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []))[0];
    }
    const [redis, postgres] = [redisR.value, postgresR.value];
    const svc = {
      registryHttp: await TcpService.start('tenant-registry:8082'),
      registryGrpc: await TcpService.start('tenant-registry:50052'),
      verifier: await TcpService.start('auth-verifier:50051'),
      realtime: await TcpService.start('realtime:8081'),
      gateway: await TcpService.start('edge-gateway:8080'),
    };
    const stack = new UpgradeStack(redis, postgres, svc, opts.env ?? {}, buildR.value);
    try {
      await stack.boot();
    } catch (err) {
      await stack.stop();
      throw err;
    }
    return stack;
  }

  get gatewayUrl(): string {
    return `http://${this.svc.gateway.address}`;
  }

  get registryUrl(): string {
    return `http://${this.svc.registryHttp.address}`;
  }

  /** WebSocket through the gateway's Service (one public origin) and straight to realtime's Service. */
  get wsUrls(): { gateway: string; realtime: string } {
    return { gateway: `ws://${this.svc.gateway.address}/ws`, realtime: `ws://${this.svc.realtime.address}/ws` };
  }

  private async boot(): Promise<void> {
    const common = {
      REDIS_URL: this.redis.url,
      REDIS_PREFIX: 'relay:',
      ADMIN_TOKEN: this.adminToken,
      INTERNAL_TOKEN: this.internalToken,
      SECRETS_KEY: this.secretsKey,
      LOG_LEVEL: 'info',
      REGISTRY_GRPC_ADDR: this.svc.registryGrpc.address,
      VERIFIER_ADDR: this.svc.verifier.address,
      REGISTRY_URL: this.registryUrl,
      REALTIME_URL: `http://${this.svc.realtime.address}`,
      ...this.env,
    };
    const add = async (name: PodName, service: string, env: (ports: number[]) => Record<string, string>, endpointsOf: (ports: number[]) => Array<[TcpService, number]>, portCount: number) => {
      const ports: number[] = [];
      for (let i = 0; i < portCount; i++) ports.push(await freePort());
      const proc = track(serviceProcess(name, service, this.build, { ...common, ...env(ports) }));
      this.pods[name] = { service, proc, build: this.build, pastLogs: '', opsPort: ports[0]!, endpoints: endpointsOf(ports) };
    };
    for (const i of [0, 1]) {
      await add(`registry-${i}` as PodName, 'tenant-registry', ([ops, http, grpc]) => ({ DATABASE_URL: this.postgres.url, REGISTRY_OPS_PORT: `${ops}`, REGISTRY_HTTP_PORT: `${http}`, REGISTRY_GRPC_PORT: `${grpc}` }), ([, http, grpc]) => [[this.svc.registryHttp, http!], [this.svc.registryGrpc, grpc!]], 3);
      await add(`verifier-${i}` as PodName, 'auth-verifier', ([http, grpc]) => ({ VERIFIER_HTTP_PORT: `${http}`, VERIFIER_GRPC_PORT: `${grpc}` }), ([, grpc]) => [[this.svc.verifier, grpc!]], 2);
      await add(`gateway-${i}` as PodName, 'edge-gateway', ([ops, http]) => ({ GATEWAY_OPS_PORT: `${ops}`, GATEWAY_PORT: `${http}`, REFUSED_AUTH_BURST: '1000000', REFUSED_AUTH_RATE_LIMIT: '1000000' }), ([, http]) => [[this.svc.gateway, http!]], 2);
      await add(`realtime-${i}` as PodName, 'realtime', ([ops, http]) => ({ REALTIME_OPS_PORT: `${ops}`, REALTIME_PORT: `${http}`, MAX_CONNECTIONS_PER_ADDRESS: '19000' }), ([, http]) => [[this.svc.realtime, http!]], 2);
    }
    // Every pod at once, as a first `kubectl apply` does: the registries' migrations take an advisory
    // lock, consumers retry their Services until an endpoint is ready, and each pod joins its Services
    // at its own /readyz (in waves, dependencies first, the boot took a few seconds more).
    await Promise.all(PODS.map((p) => this.startPod(p)));
    // What the Services refused while the pods came up is not what a rollout costs.
    for (const svc of Object.values(this.svc)) svc.refused = 0;
  }

  /** Starts a pod and adds it to its Services once /readyz answers 200. */
  private async startPod(name: PodName): Promise<void> {
    const pod = this.pods[name];
    pod.proc.start();
    await waitReady(pod, name);
    for (const [svc, port] of pod.endpoints) svc.add(port);
  }

  /**
   * One step of a rolling upgrade: out of its Services, SIGTERM, wait for
   * the exit, start again (from `to` when given: the pod's new image, same
   * environment and ports), wait for readiness, back into its Services.
   */
  async restart(name: PodName, to?: Build): Promise<RestartStep> {
    const pod = this.pods[name];
    const from = pod.build;
    for (const [svc, port] of pod.endpoints) svc.remove(port);
    const t0 = Date.now();
    const exitCode = await pod.proc.stop('SIGTERM', 15_000);
    const t1 = Date.now();
    if (to && to !== from) {
      pod.pastLogs += pod.proc.logs;
      pod.proc = track(serviceProcess(name, pod.service, to, { ...pod.proc.environment }));
      pod.build = to;
    }
    await this.startPod(name);
    const step = { pod: name, from: from.label, to: pod.build.label, stopMs: t1 - t0, startMs: Date.now() - t1, exitCode };
    this.steps.push(step);
    return step;
  }

  /** Every pod's own /metrics text, from its ops listener (Prometheus scrapes pods, not Services). */
  async scrapeAll(): Promise<Array<[PodName, string]>> {
    return Promise.all(PODS.map(async (n) => [n, await (await fetch(`http://127.0.0.1:${opsPortOf(this.pods[n])}/metrics`)).text()] as [PodName, string]));
  }

  /** Pods that are not running although no restart is in progress. */
  crashed(): string[] {
    return PODS.filter((n) => !this.pods[n].proc.running).map((n) => `${n} exited ${String(this.pods[n].proc.exitCode)}\n${this.pods[n].proc.logs.slice(-1500)}`);
  }

  /** Every pod's output, each process it ran (every build) included. */
  allLogs(): string {
    return PODS.map((n) => (this.pods[n] ? this.pods[n].pastLogs + this.pods[n].proc.logs : '')).join('\n');
  }

  /** A pod's own address for a Service's port (the pod, not the Service): e.g. one gateway replica's public port. */
  podAddress(name: PodName): string {
    return `127.0.0.1:${this.pods[name].endpoints[0]![1]}`;
  }

  async stop(): Promise<void> {
    await Promise.all(PODS.filter((n) => this.pods[n]).map((n) => this.pods[n].proc.stop('SIGTERM', 10_000)));
    await Promise.all(Object.values(this.svc).map((s) => s.stop()));
    await Promise.all([this.redis.stop(), this.postgres.destroy()]);
  }
}

/** A service of `build` as its Dockerfile runs it: node --import tsx, in that checkout (its own node_modules). */
function serviceProcess(name: PodName, service: string, build: Build, env: Record<string, string>): ManagedProcess {
  return new ManagedProcess(name, process.execPath, ['--import', 'tsx', `services/${service}/src/main.ts`], env, { cwd: build.dir });
}

/** The port a pod serves /readyz and /metrics on, as its build's manifests say. */
function opsPortOf(pod: Pod): number {
  return pod.build.opsOn === 'ops' || pod.service === 'auth-verifier' ? pod.opsPort : pod.endpoints[0]![1];
}

/** Until the pod's /readyz answers 200 where its build's readiness probe asks. */
async function waitReady(pod: Pod, name: PodName): Promise<void> {
  await waitForHttp(`http://127.0.0.1:${opsPortOf(pod)}/readyz`, 30_000, pod.proc);
  if (!pod.proc.running) throw new Error(`${name} exited (${String(pod.proc.exitCode)}) once ready\n${pod.proc.logs.slice(-3000)}`);
}
