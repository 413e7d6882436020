import { randomBytes } from 'node:crypto';
import { freePort, ManagedProcess, waitForHttp } from '../../support/processes';
import { PrivatePostgres, PrivateRedis, track } from './backends';
import { TcpService } from './tcp-service';

/** The Deployments of deploy/kubernetes/base, two replicas each, in the order a rolling upgrade takes them. */
export const PODS = ['registry-0', 'registry-1', 'verifier-0', 'verifier-1', 'gateway-0', 'gateway-1', 'realtime-0', 'realtime-1'] as const;
export type PodName = (typeof PODS)[number];

interface Pod {
  proc: ManagedProcess;
  /** The ops listener (/healthz, /readyz, /metrics): what the kubelet probes and Prometheus scrapes. */
  opsPort: number;
  /** The Service ports this pod is an endpoint of: [service, the pod's own port]. */
  endpoints: Array<[TcpService, number]>;
}

export interface RestartStep {
  pod: PodName;
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
 * PostgreSQL.
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
  ) {}

  /** `env`: more environment for every pod (e.g. a shorter KEY_CACHE_TTL_S). */
  static async start(opts: { env?: Record<string, string> } = {}): Promise<UpgradeStack> {
    const [redis, postgres] = await Promise.all([PrivateRedis.start({ persistent: true }), PrivatePostgres.start()]);
    const svc = {
      registryHttp: await TcpService.start('tenant-registry:8082'),
      registryGrpc: await TcpService.start('tenant-registry:50052'),
      verifier: await TcpService.start('auth-verifier:50051'),
      realtime: await TcpService.start('realtime:8081'),
      gateway: await TcpService.start('edge-gateway:8080'),
    };
    const stack = new UpgradeStack(redis, postgres, svc, opts.env ?? {});
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
    /** ports[0] is the pod's ops listener (the verifier's HTTP port is its ops listener). */
    const add = async (name: PodName, service: string, env: (ports: number[]) => Record<string, string>, endpointsOf: (ports: number[]) => Array<[TcpService, number]>, portCount: number) => {
      const ports: number[] = [];
      for (let i = 0; i < portCount; i++) ports.push(await freePort());
      const proc = track(new ManagedProcess(name, process.execPath, ['--import', 'tsx', `services/${service}/src/main.ts`], { ...common, ...env(ports) }));
      this.pods[name] = { proc, opsPort: ports[0]!, endpoints: endpointsOf(ports) };
    };
    for (const i of [0, 1]) {
      await add(`registry-${i}` as PodName, 'tenant-registry', ([ops, http, grpc]) => ({ DATABASE_URL: this.postgres.url, REGISTRY_OPS_PORT: `${ops}`, REGISTRY_HTTP_PORT: `${http}`, REGISTRY_GRPC_PORT: `${grpc}` }), ([, http, grpc]) => [[this.svc.registryHttp, http!], [this.svc.registryGrpc, grpc!]], 3);
      await add(`verifier-${i}` as PodName, 'auth-verifier', ([http, grpc]) => ({ VERIFIER_HTTP_PORT: `${http}`, VERIFIER_GRPC_PORT: `${grpc}` }), ([, grpc]) => [[this.svc.verifier, grpc!]], 2);
      await add(`gateway-${i}` as PodName, 'edge-gateway', ([ops, http]) => ({ GATEWAY_OPS_PORT: `${ops}`, GATEWAY_PORT: `${http}`, REFUSED_AUTH_BURST: '1000000', REFUSED_AUTH_RATE_LIMIT: '1000000' }), ([, http]) => [[this.svc.gateway, http!]], 2);
      await add(`realtime-${i}` as PodName, 'realtime', ([ops, http]) => ({ REALTIME_OPS_PORT: `${ops}`, REALTIME_PORT: `${http}`, MAX_CONNECTIONS_PER_ADDRESS: '19000' }), ([, http]) => [[this.svc.realtime, http!]], 2);
    }
    // Dependencies first, as readiness would order them anyway.
    await Promise.all(['registry-0', 'registry-1'].map((p) => this.startPod(p as PodName)));
    await Promise.all(['verifier-0', 'verifier-1'].map((p) => this.startPod(p as PodName)));
    await Promise.all(['realtime-0', 'realtime-1', 'gateway-0', 'gateway-1'].map((p) => this.startPod(p as PodName)));
  }

  /** Starts a pod and adds it to its Services once /readyz answers 200. */
  private async startPod(name: PodName): Promise<void> {
    const pod = this.pods[name];
    pod.proc.start();
    await waitForHttp(`http://127.0.0.1:${pod.opsPort}/readyz`, 30_000, pod.proc);
    for (const [svc, port] of pod.endpoints) svc.add(port);
  }

  /**
   * One step of the rolling upgrade: out of its Services, SIGTERM, wait for
   * the exit, start again, wait for readiness, back into its Services.
   */
  async restart(name: PodName): Promise<RestartStep> {
    const pod = this.pods[name];
    for (const [svc, port] of pod.endpoints) svc.remove(port);
    const t0 = Date.now();
    const exitCode = await pod.proc.stop('SIGTERM', 15_000);
    const t1 = Date.now();
    await this.startPod(name);
    const step = { pod: name, stopMs: t1 - t0, startMs: Date.now() - t1, exitCode };
    this.steps.push(step);
    return step;
  }

  /** Every pod's own /metrics text, from its ops listener (Prometheus scrapes pods, not Services). */
  async scrapeAll(): Promise<Array<[PodName, string]>> {
    return Promise.all(PODS.map(async (n) => [n, await (await fetch(`http://127.0.0.1:${this.pods[n].opsPort}/metrics`)).text()] as [PodName, string]));
  }

  /** Pods that are not running although no restart is in progress. */
  crashed(): string[] {
    return PODS.filter((n) => !this.pods[n].proc.running).map((n) => `${n} exited ${String(this.pods[n].proc.exitCode)}\n${this.pods[n].proc.logs.slice(-1500)}`);
  }

  allLogs(): string {
    return PODS.map((n) => this.pods[n]?.proc.logs ?? '').join('\n');
  }

  async stop(): Promise<void> {
    await Promise.all(PODS.filter((n) => this.pods[n]).map((n) => this.pods[n].proc.stop('SIGTERM', 10_000)));
    await Promise.all(Object.values(this.svc).map((s) => s.stop()));
    await Promise.all([this.redis.stop(), this.postgres.destroy()]);
  }
}
