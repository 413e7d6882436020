import { randomBytes } from 'node:crypto';
import { freePort, ManagedProcess, waitForHttp } from '../../support/processes';
import { PrivatePostgres, PrivateRedis, track, type RedisMode } from './backends';
import { BlackholeProxy } from './blackhole-proxy';

/** Every service a stack may run; `registry2` and `gateway2` only with the options below. */
export const SERVICES = ['registry', 'registry2', 'verifier1', 'verifier2', 'realtime1', 'realtime2', 'gateway', 'gateway2'] as const;
export type ServiceName = (typeof SERVICES)[number];

export interface FaultStackOptions {
  redis?: RedisMode;
  /** TENANT_LEASE_MS of verifiers, gateway and realtime (the services' default is 2000). */
  leaseMs?: number;
  /** The registry's PROPAGATION_TIMEOUT_MS (default 3000). */
  propagationTimeoutMs?: number;
  /** REDIS_URL of every service, read at boot (default: the stack's own private Redis), e.g. a Sentinel group's URL. */
  redisUrl?: () => string;
  /** Services that reach the registry's gRPC port (tenant feed, channel rules) through a BlackholeProxy of their own. */
  feedProxyFor?: ServiceName[];
  /** Extra environment for every service (e.g. a shorter KEY_CACHE_TTL_S). */
  serviceEnv?: Record<string, string>;
  /**
   * 2: a second gateway, in front of verifier2 and realtime2 (the first stays
   * in front of verifier1 and realtime1). Default 1.
   */
  gateways?: 1 | 2;
  /**
   * 2: a second registry replica on the same PostgreSQL; every consumer's
   * REGISTRY_GRPC_ADDR and the gateways' REGISTRY_URL name both. Default 1.
   */
  registries?: 1 | 2;
}

export interface AdminResult {
  /** HTTP status, or 0 when no answer came (connection refused or reset, timeout). */
  status: number;
  body: Record<string, unknown> | undefined;
  text: string;
  /** Wall time from sending the call until its answer (or failure). */
  ms: number;
  /** Date.now() when the call was sent and when it was answered. */
  sentAt: number;
  answeredAt: number;
}

/**
 * The distributed deployment as separate processes on private backends:
 * Redis and PostgreSQL of its own (so they can be killed, frozen, stopped),
 * the registry, two verifiers, two realtime instances (realtime1 behind
 * verifier1, realtime2 behind verifier2) and the gateway (verifier1, realtime1);
 * optionally a second registry replica and a second gateway (verifier2, realtime2).
 */
export class FaultStack {
  readonly adminToken = randomBytes(32).toString('base64url');
  readonly internalToken = randomBytes(32).toString('base64url');
  readonly secretsKey = randomBytes(32).toString('base64');
  readonly leaseMs: number;
  readonly propagationTimeoutMs: number;
  readonly services = {} as Record<ServiceName, ManagedProcess>;
  private readonly health = {} as Record<ServiceName, string>;
  private readonly ready = {} as Record<ServiceName, string>;
  /** Services this suite stopped on purpose and has not restarted yet. */
  private readonly down = new Set<ServiceName>();
  private readonly frozen = new Set<ServiceName>();
  /** The services this stack runs (SERVICES, less registry2/gateway2 unless asked for). */
  readonly names: ServiceName[];
  gatewayUrl = '';
  registryUrl = '';
  /** Every gateway's base URL (gatewayUrl first). */
  gatewayUrls: string[] = [];
  /** Every registry replica's base URL (registryUrl first). */
  registryUrls: string[] = [];
  realtimeWs: [string, string] = ['', ''];
  /** Each service's own /readyz. */
  readyUrl(name: ServiceName): string {
    return this.ready[name];
  }
  /** The proxies of `feedProxyFor`: blackhole() cuts that service off from the registry's gRPC port, heal() restores it. */
  readonly feedProxies: Partial<Record<ServiceName, BlackholeProxy>> = {};

  private constructor(
    readonly redis: PrivateRedis,
    readonly postgres: PrivatePostgres,
    opts: FaultStackOptions,
  ) {
    this.leaseMs = opts.leaseMs ?? 2000;
    this.propagationTimeoutMs = opts.propagationTimeoutMs ?? 3000;
    this.redisUrl = opts.redisUrl;
    this.feedProxyFor = opts.feedProxyFor ?? [];
    this.serviceEnv = opts.serviceEnv ?? {};
    this.gateways = opts.gateways ?? 1;
    this.registries = opts.registries ?? 1;
    this.names = SERVICES.filter((n) => (n !== 'gateway2' || this.gateways === 2) && (n !== 'registry2' || this.registries === 2));
  }

  private readonly feedProxyFor: ServiceName[];
  private readonly serviceEnv: Record<string, string>;
  private readonly gateways: 1 | 2;
  private readonly registries: 1 | 2;

  private readonly redisUrl: (() => string) | undefined;

  static async start(opts: FaultStackOptions = {}): Promise<FaultStack> {
    const [redis, postgres] = await Promise.all([PrivateRedis.start(opts.redis), PrivatePostgres.start()]);
    const stack = new FaultStack(redis, postgres, opts);
    try {
      await stack.boot();
    } catch (err) {
      await stack.stop();
      throw err;
    }
    return stack;
  }

  private async boot(): Promise<void> {
    const ports = {
      registryHttp: [await freePort(), await freePort()],
      registryGrpc: [await freePort(), await freePort()],
      verifierGrpc: [await freePort(), await freePort()],
      verifierHttp: [await freePort(), await freePort()],
      realtime: [await freePort(), await freePort()],
      gateway: [await freePort(), await freePort()],
      // The ops listeners (/healthz, /readyz, /metrics); the verifier's is its HTTP port.
      registryOps: [await freePort(), await freePort()],
      realtimeOps: [await freePort(), await freePort()],
      gatewayOps: [await freePort(), await freePort()],
    };
    const replicas = this.registries === 2 ? [0, 1] : [0];
    // One replica: host:port as before; two: the list form (a grpc-js ipv4: target, pick_first).
    const registryGrpc = replicas.map((i) => `127.0.0.1:${ports.registryGrpc[i]}`).join(',');
    const registryUrls = replicas.map((i) => `http://127.0.0.1:${ports.registryHttp[i]}`);
    const common = {
      REDIS_URL: this.redisUrl?.() ?? this.redis.url,
      REDIS_PREFIX: 'relay:',
      ADMIN_TOKEN: this.adminToken,
      INTERNAL_TOKEN: this.internalToken,
      SECRETS_KEY: this.secretsKey,
      LOG_LEVEL: 'info',
      // Tests probe revoked and garbage tokens from one address by the hundred: the gateway's
      // refused-credential budget (overload.test.ts sets the defaults back) would answer them 429.
      REFUSED_AUTH_BURST: '1000000',
      REFUSED_AUTH_RATE_LIMIT: '1000000',
      ...this.serviceEnv,
    };
    const consumer = { REGISTRY_GRPC_ADDR: registryGrpc, TENANT_LEASE_MS: `${this.leaseMs}` };
    // A proxied service reaches the first registry replica only, through its proxy.
    for (const n of this.feedProxyFor) this.feedProxies[n] = await BlackholeProxy.start(`127.0.0.1:${ports.registryGrpc[0]}`);
    /** `opsPort`: the service's ops listener, which listens last (its /healthz answering means the service is up). */
    const add = (name: ServiceName, service: string, env: Record<string, string>, opsPort: number) => {
      const proxy = this.feedProxies[name];
      const viaProxy: Record<string, string> = proxy ? { REGISTRY_GRPC_ADDR: proxy.address } : {};
      this.services[name] = track(new ManagedProcess(name, process.execPath, ['--import', 'tsx', `services/${service}/src/main.ts`], { ...common, ...env, ...viaProxy }));
      this.health[name] = `http://127.0.0.1:${opsPort}/healthz`;
      this.ready[name] = `http://127.0.0.1:${opsPort}/readyz`;
    };
    for (const i of replicas) {
      add(i === 0 ? 'registry' : 'registry2', 'tenant-registry', {
        DATABASE_URL: this.postgres.url,
        REGISTRY_HTTP_PORT: `${ports.registryHttp[i]}`,
        REGISTRY_GRPC_PORT: `${ports.registryGrpc[i]}`,
        REGISTRY_OPS_PORT: `${ports.registryOps[i]}`,
        PROPAGATION_TIMEOUT_MS: `${this.propagationTimeoutMs}`,
      }, ports.registryOps[i]!);
    }
    for (const i of [0, 1] as const) {
      add(i === 0 ? 'verifier1' : 'verifier2', 'auth-verifier', {
        ...consumer,
        VERIFIER_GRPC_PORT: `${ports.verifierGrpc[i]}`,
        VERIFIER_HTTP_PORT: `${ports.verifierHttp[i]}`,
      }, ports.verifierHttp[i]!);
    }
    for (const i of [0, 1] as const) {
      add(i === 0 ? 'realtime1' : 'realtime2', 'realtime', {
        ...consumer,
        REALTIME_PORT: `${ports.realtime[i]}`,
        REALTIME_OPS_PORT: `${ports.realtimeOps[i]}`,
        VERIFIER_ADDR: `127.0.0.1:${ports.verifierGrpc[i]}`,
      }, ports.realtimeOps[i]!);
    }
    const gateways = this.gateways === 2 ? [0, 1] : [0];
    for (const i of gateways) {
      add(i === 0 ? 'gateway' : 'gateway2', 'edge-gateway', {
        ...consumer,
        GATEWAY_PORT: `${ports.gateway[i]}`,
        GATEWAY_OPS_PORT: `${ports.gatewayOps[i]}`,
        VERIFIER_ADDR: `127.0.0.1:${ports.verifierGrpc[i]}`,
        REGISTRY_URL: registryUrls.join(','),
        REALTIME_URL: `http://127.0.0.1:${ports.realtime[i]}`,
      }, ports.gatewayOps[i]!);
    }
    this.gatewayUrls = gateways.map((i) => `http://127.0.0.1:${ports.gateway[i]}`);
    this.gatewayUrl = this.gatewayUrls[0]!;
    this.registryUrls = registryUrls;
    this.registryUrl = registryUrls[0]!;
    this.realtimeWs = [`ws://127.0.0.1:${ports.realtime[0]}/ws`, `ws://127.0.0.1:${ports.realtime[1]}/ws`];

    // Every process at once: the registries' migrations take an advisory lock, and the consumers
    // retry the registry until it answers (as after any restart); /readyz says when all are wired.
    // One after the other, the three start phases cost ~9 s a stack, most of a fault file's setup.
    await Promise.all(this.names.map((n) => this.restart(n)));
    await this.waitReady();
  }

  /** The service's Prometheus text (its ops listener's /metrics). */
  async metrics(name: ServiceName): Promise<string> {
    const res = await fetch(this.health[name].replace(/\/healthz$/, '/metrics'), { signal: AbortSignal.timeout(5000) });
    return res.text();
  }

  /** Starts a service that is down and waits until its ops listener answers /healthz. */
  async restart(name: ServiceName): Promise<void> {
    const p = this.services[name];
    if (p.running) throw new Error(`${name} is already running`);
    p.start();
    await waitForHttp(this.health[name], 30_000, p);
    this.down.delete(name);
  }

  /** SIGKILL, as a crash or the OOM killer would; resolves once the process is gone. */
  async kill(name: ServiceName): Promise<void> {
    this.down.add(name);
    await this.services[name].stop('SIGKILL');
  }

  /** SIGSTOP: the process keeps its sockets and answers nothing (a stalled instance). */
  freeze(name: ServiceName): void {
    this.services[name].signal('SIGSTOP');
    this.frozen.add(name);
  }

  resume(name: ServiceName): void {
    this.frozen.delete(name);
    if (this.services[name].running) this.services[name].signal('SIGCONT');
  }

  /** Waits (bounded) until every service reports its dependencies reachable on /readyz. */
  async waitReady(timeoutMs = 30_000): Promise<void> {
    await Promise.all(this.names.map((n) => waitForHttp(this.ready[n], timeoutMs, this.services[n])));
  }

  /** Services that exited although this suite did not stop them (a crash). */
  crashed(): Array<{ name: string; code: number | null | undefined; tail: string }> {
    return this.names.filter((n) => !this.services[n].running && !this.down.has(n)).map((n) => ({
      name: n,
      code: this.services[n].exitCode,
      tail: this.services[n].logs.slice(-1500),
    }));
  }

  /**
   * Puts the stack back the way the next test expects it: backends up (and
   * resumed), every service the suite stopped started again, all ready.
   * Crashed services are restarted too, after crashed() has reported them.
   */
  async restore(): Promise<void> {
    for (const p of Object.values(this.feedProxies)) p.heal();
    for (const n of [...this.frozen]) this.resume(n);
    if (this.redis.frozen) this.redis.resume();
    if (!this.redis.running) await this.redis.start();
    if (this.postgres.frozen) this.postgres.resume();
    if (!this.postgres.running) await this.postgres.start();
    for (const n of this.names) {
      if (!this.services[n].running) await this.restart(n);
    }
    await this.waitReady();
  }

  /** One admin API call straight to the registry (not the CLI: a tsx start per call would cost a second). */
  async admin(method: 'GET' | 'POST', path: string, timeoutMs = 15_000, replica: 0 | 1 = 0): Promise<AdminResult> {
    const sentAt = Date.now();
    let status = 0;
    let text = '';
    try {
      const res = await fetch(`${this.registryUrls[replica] ?? this.registryUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.adminToken}` },
        signal: AbortSignal.timeout(timeoutMs),
      });
      status = res.status;
      text = await res.text();
    } catch (err) {
      text = (err as Error).message;
    }
    const answeredAt = Date.now();
    let body: Record<string, unknown> | undefined;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      body = undefined;
    }
    return { status, body, text, ms: answeredAt - sentAt, sentAt, answeredAt };
  }

  allLogs(): string {
    return [...this.names.map((n) => this.services[n].logs), this.redis.logs, this.postgres.logs].join('\n');
  }

  /** Stops everything this stack started, by PID, and removes its data directories. */
  async stop(): Promise<void> {
    for (const n of [...this.frozen]) this.resume(n);
    if (this.redis.frozen) this.redis.resume();
    if (this.postgres.frozen) this.postgres.resume();
    await Promise.all(this.names.filter((n) => this.services[n]).map((n) => this.services[n].stop('SIGTERM', 10_000)));
    await Promise.all([this.redis.stop(), this.postgres.destroy(), ...Object.values(this.feedProxies).map((p) => p.stop())]);
  }
}
