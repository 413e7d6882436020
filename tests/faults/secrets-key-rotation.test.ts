import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, signWithJose } from '../support/host';
import { runCommand } from '../support/processes';
import { UpgradeStack, type PodName } from './support/upgrade-stack';

// Issue #33 item 2: SECRETS_KEY rotated with no request of any tenant
// failing, by the runbook of docs/OPERATIONS.md "Rotating SECRETS_KEY" as
// written, on the manifests' deployment (two replicas of every service behind
// stand-ins for their Services, a private PostgreSQL and Redis):
//   step 1: SECRETS_KEYS=k1:<new> beside SECRETS_KEY on every registry and
//           verifier, rolled one replica at a time;
//   step 2: `npm run admin -- secrets-key --wait` until done;
//   step 3: SECRETS_KEY removed from every registry and verifier, rolled.
// Throughout, every tenant's host-sync fetch and a token signed with what it
// returned go through the gateway, and after every restart the admin API
// seals new secrets (a tenant, a JWT rotation, callbacks, a webhook endpoint)
// under whichever key seals at that moment: every answer must be a 2xx.

interface Tenant {
  id: string;
  clientId: string;
  clientSecret: string;
}

const ROLL: PodName[] = ['registry-0', 'registry-1', 'verifier-0', 'verifier-1'];

/** Host-sync fetches and token checks through the gateway, round-robin over the tenants, every non-2xx kept. */
class HostTraffic {
  readonly failures: string[] = [];
  fetches = 0;
  checks = 0;
  private stopped = false;
  private loops: Array<Promise<void>> = [];

  constructor(
    private readonly gatewayUrl: string,
    readonly tenants: Tenant[],
  ) {}

  start(loops: number): void {
    for (let l = 0; l < loops; l++) this.loops.push(this.loop(l));
  }

  private async loop(offset: number): Promise<void> {
    const until = Date.now() + 150_000;
    for (let round = offset; round < 100_000 && !this.stopped && Date.now() < until; round++) {
      const t = this.tenants[round % this.tenants.length]!;
      const fetched = await this.call(`fetch ${t.id}`, `${this.gatewayUrl}/api/host/tenants/${t.id}/jwt_secret/fetch`, { method: 'POST', headers: { authorization: basic(t.clientId, t.clientSecret) } });
      this.fetches++;
      if (fetched === undefined) continue;
      const secret = (JSON.parse(fetched) as { jwt_secret_primary: string }).jwt_secret_primary;
      const token = await signWithJose(secret, t.id, randomUUID());
      await this.call(`me ${t.id}`, `${this.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } });
      this.checks++;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  private async call(what: string, url: string, init: RequestInit): Promise<string | undefined> {
    try {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
      const body = await res.text();
      if (res.status >= 200 && res.status < 300) return body;
      this.failures.push(`${new Date().toISOString()} ${what}: ${res.status} ${body.slice(0, 200)}`);
    } catch (err) {
      this.failures.push(`${new Date().toISOString()} ${what}: no answer (${(err as Error).message})`);
    }
    return undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }
}

describe('faults: SECRETS_KEY rotated one replica at a time under traffic (#33 item 2)', () => {
  const oldKey = randomBytes(32).toString('base64');
  const newKey = randomBytes(32).toString('base64');
  let stack: UpgradeStack | undefined;
  beforeAll(async () => {
    // Verifiers keep keys 1 s, so token checks keep reaching the registries (and their keyring) all along.
    // Two rows per re-encryption batch: the re-encryption takes many transactions, interleaved with the traffic.
    stack = await UpgradeStack.start({ env: { SECRETS_KEY: oldKey, KEY_CACHE_TTL_S: '1', SECRETS_REENCRYPT_BATCH: '2' } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('adds a key, re-encrypts every stored secret, removes the old key: every fetch, token check and admin write answered 2xx', async () => {
    const s = stack!;
    const started = Date.now();
    const adminFailures: string[] = [];
    const adminLog: string[] = [];
    const admin = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown> | undefined> => {
      adminLog.push(`${new Date().toISOString()} ${method} ${path}`);
      const res = await fetch(`${s.registryUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${s.adminToken}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(15_000),
      }).catch((err: Error) => err);
      if (res instanceof Error || res.status < 200 || res.status > 299) {
        adminFailures.push(`${method} ${path}: ${res instanceof Error ? res.message : `${res.status} ${await res.text()}`}`);
        return undefined;
      }
      return (await res.json()) as Record<string, unknown>;
    };
    const newTenant = async (): Promise<Tenant> => {
      const b = (await admin('POST', '/admin/tenants'))!;
      return { id: String(b.tenant_id), clientId: String(b.host_sync_client_id), clientSecret: String(b.host_sync_client_secret) };
    };
    const tenants: Tenant[] = [];
    for (let i = 0; i < 4; i++) tenants.push(await newTenant());
    const traffic = new HostTraffic(s.gatewayUrl, tenants);
    traffic.start(2);

    /**
     * After each restart: secrets sealed under whichever key seals now, by
     * whichever registry answers. The tenant joins the traffic once its JWT
     * rotation answered 200 (in force on every verifier): a host that fetched
     * the new primary while the rotation was still propagating could sign
     * tokens a verifier refuses for those milliseconds, whatever the keyring.
     */
    let writes = 0;
    const sealSomething = async () => {
      const t = await newTenant();
      await admin('POST', `/admin/tenants/${t.id}/jwt_secret/rotate`);
      await admin('PUT', `/admin/tenants/${t.id}/callbacks`, { url: 'http://127.0.0.1:9/callback', subscribe: ['rotation-*'] });
      await admin('POST', `/admin/tenants/${t.id}/webhooks`, { url: 'https://hooks.example.com/relay', events: ['channel_occupied'] });
      tenants.push(t);
      writes++;
    };
    const roll = async (env: Record<string, string | undefined>) => {
      for (const pod of ROLL) {
        s.pods[pod].proc.setEnv(env);
        const step = await s.restart(pod);
        expect(step.exitCode, `${pod} exit code on SIGTERM`).toBe(0);
        await sealSomething();
      }
    };

    let cli: Awaited<ReturnType<typeof runCommand>> | undefined;
    try {
      // Step 1: the new key beside the old one, everywhere, one replica at a time.
      await roll({ SECRETS_KEYS: `k1:${newKey}` });
      // Step 2: the registries activate k1 (both have it) and re-encrypt; the operator follows it to the end.
      cli = await runCommand(process.execPath, ['--import', 'tsx', 'services/tenant-registry/src/cli/admin-cli.ts', 'secrets-key', '--wait', '--timeout', '60'], { REGISTRY_URL: s.registryUrl, ADMIN_TOKEN: s.adminToken }, 90_000);
      // Step 3: the old key removed, everywhere, one replica at a time.
      await roll({ SECRETS_KEY: undefined });
    } finally {
      await traffic.stop();
    }
    const final = await admin('GET', '/admin/secrets-key');
    console.log(
      `[secrets-key] ${ROLL.length * 2} restarts in ${Date.now() - started} ms (${s.steps.map((x) => `${x.pod} stop ${x.stopMs}/ready ${x.startMs} ms`).join(', ')}); ` +
        `${traffic.fetches} host-sync fetches and ${traffic.checks} token checks over ${tenants.length} tenants, ${traffic.failures.length} not 2xx; ${writes * 4 + 4} admin writes, ${adminFailures.length} not 2xx; ` +
        `secrets-key --wait: exit ${cli.code}, ${cli.stderr.trim().split('\n').length} lines; final ${JSON.stringify(final?.secrets)}`,
    );

    if (traffic.failures.length > 0) console.log(adminLog.join('\n'));
    expect(s.crashed(), 'every pod is running').toEqual([]);
    expect(traffic.failures, 'every host-sync fetch and token check answered 2xx').toEqual([]);
    expect(adminFailures, 'every admin write answered 2xx').toEqual([]);
    expect(traffic.checks).toBeGreaterThan(100);
    expect(cli.code, cli.stderr).toBe(0);
    expect(cli.stderr.trim().split('\n').at(-1)).toBe('done: every stored secret is sealed under k1; no longer used: k0 (remove from SECRETS_KEYS / SECRETS_KEY and roll the registries and verifiers)');
    // 4 + 8 tenants: primary JWT secrets, 8 previous ones (each rotation a tenant of its own), 8 callbacks and 8 webhook secrets, the host-sync hash key.
    const values = tenants.length + 8 + 8 + 8 + 1;
    expect(final).toMatchObject({ active_key_id: 'k1', state: 'done', secrets: { k1: values }, total: values, configured_key_ids: ['k1'], removable_key_ids: [] });

    // The old key alone can no longer run a registry: it stops at start, naming the variable and the key it lacks.
    const old = await runCommand(process.execPath, ['--import', 'tsx', 'services/tenant-registry/src/main.ts'], {
      DATABASE_URL: s.postgres.url,
      REDIS_URL: s.redis.url,
      ADMIN_TOKEN: s.adminToken,
      INTERNAL_TOKEN: s.internalToken,
      SECRETS_KEY: oldKey,
      REGISTRY_HTTP_PORT: '0',
      REGISTRY_GRPC_PORT: '0',
      REGISTRY_OPS_PORT: '0',
    });
    expect(old.code).toBe(1);
    expect(old.stderr).toContain(`configuration error: SECRETS_KEY lacks key k1, which sealed ${values} stored secrets`);

    const logs = s.allLogs();
    expect(logs).toContain('secrets keyring: every registry has the newest key; it seals from now on');
    for (const secret of [oldKey, newKey, ...tenants.map((t) => t.clientSecret)]) expect(logs).not.toContain(secret);
  }, 180_000);
});
