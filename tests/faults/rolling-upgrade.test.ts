import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchSecret, signWithJose } from '../support/host';
import { REPO_ROOT } from '../support/processes';
import { TestSocket } from '../support/ws-client';
import { allExpressions, exposedNames, serviceMetricNames } from '../deploy/promql';
import { compareVersions, findPreviousRelease } from '../support/releases';
import { ReleaseCheckout } from './support/previous-release';
import { compareIds } from './support/probes';
import { CURRENT_BUILD, PODS, UpgradeStack, type PodName } from './support/upgrade-stack';
import { ResumingSubscriber, RestTraffic } from './support/upgrade-traffic';

// Issue #33 item 3: an upgrade across versions loses nothing. The previous
// release (CHANGELOG.md; by its tag, else the commit recorded there) is
// checked out in a temporary git worktree and installed as its image is.
// The deployment of deploy/kubernetes (two replicas of each service, every
// peer reached through its Service) runs from it on one private PostgreSQL
// and Redis, under steady REST publishes and reads and WebSocket
// subscribers. Then every pod in turn, in the documented order (registries,
// verifiers, gateways, realtime), leaves its Services, gets SIGTERM, starts
// from this checkout and rejoins once ready. The first new registry applies
// the new migrations while every other pod still runs the previous release;
// the old registry restarts on the migrated schema (as an old pod
// rescheduled mid-rollout, or a rollback, would), and both registries serve
// admin calls, each reading what the other wrote. With the gateways half upgraded a second tenant is disabled: its
// connections on old and new pods close at once, and its tokens are refused
// by every pod, old or new, until the end. docs/OPERATIONS.md "Upgrading
// from one release to the next".

interface Tenant {
  id: string;
  secret: string;
  token(user?: string): Promise<string>;
}

async function createTenant(registryUrl: string, gatewayUrl: string, adminToken: string): Promise<Tenant> {
  const res = await fetch(`${registryUrl}/admin/tenants`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } });
  expect(res.status, `POST ${registryUrl}/admin/tenants`).toBe(201);
  const b = (await res.json()) as { tenant_id: string; host_sync_client_id: string; host_sync_client_secret: string };
  const f = await fetchSecret(gatewayUrl, b.tenant_id, b.host_sync_client_id, b.host_sync_client_secret);
  expect(f.status, 'host-sync secret fetch through the gateway').toBe(200);
  const secret = ((await f.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
  return { id: b.tenant_id, secret, token: (user = randomUUID()) => signWithJose(secret, b.tenant_id, user, 900) };
}

async function me(gatewayUrl: string, token: string): Promise<number> {
  const res = await fetch(`${gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5000) });
  await res.arrayBuffer();
  return res.status;
}

async function upgradeStatus(url: string, token: string): Promise<number> {
  try {
    const s = await TestSocket.open(url, token);
    s.ws.terminate();
    return 101;
  } catch (err) {
    return (err as { status?: number }).status ?? 0;
  }
}

function migrationFiles(root: string): string[] {
  return readdirSync(join(root, 'services/tenant-registry/migrations'))
    .filter((f) => /^\d+_[a-z0-9_]+\.sql$/.test(f))
    .sort();
}

async function appliedMigrations(stack: UpgradeStack): Promise<string[]> {
  return (await stack.postgres.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name')).map((r) => r.name);
}

/** A channel's whole REST history after `anchor`, page by page (oldest first). */
async function history(gatewayUrl: string, token: string, channel: string, anchor: string): Promise<{ ids: string[]; notRecovered: unknown[] }> {
  const ids: string[] = [];
  const notRecovered: unknown[] = [];
  let after = anchor;
  for (let page = 0; page < 500; page++) {
    const res = await fetch(`${gatewayUrl}/api/v1/channels/${channel}/messages?after=${after}&limit=100`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const b = (await res.json()) as { messages: Array<{ id: string }>; recovered?: boolean };
    if (b.recovered === false) notRecovered.push(b);
    ids.push(...b.messages.map((m) => m.id));
    if (b.messages.length < 100) break;
    after = b.messages.at(-1)!.id;
  }
  return { ids, notRecovered };
}

/**
 * Probes, until stopped, that nothing of a disabled tenant is accepted:
 * through the gateway's Service (REST with a fresh and a used token), and
 * on every gateway and realtime pod directly (REST, WebSocket upgrades),
 * counting which build answered.
 */
function probeDisabled(stack: UpgradeStack, t: Tenant, usedToken: string) {
  let stopped = false;
  const accepted: string[] = [];
  /** Answers of the Services other than a refusal, no answer, or a 503 with Retry-After. */
  const serviceErrors: string[] = [];
  const answers = new Map<string, number>();
  /** `<service> <build>` → probes a pod of that build answered (not counted: a pod between builds, or no answer). */
  const servedBy = new Map<string, number>();
  let probes = 0;
  const count = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  const viaService = async (what: string, tok: string): Promise<void> => {
    try {
      const res = await fetch(`${stack.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${tok}` }, signal: AbortSignal.timeout(5000) });
      await res.arrayBuffer();
      count(answers, `rest ${res.status}`);
      if (res.status < 300) accepted.push(`${new Date().toISOString()} REST /api/v1/me through the gateway Service answered ${res.status} to a ${what} token`);
      if (res.status >= 500 && !(res.status === 503 && res.headers.get('retry-after') !== null)) serviceErrors.push(`REST ${res.status} (${what} token)`);
    } catch {
      count(answers, 'rest 0');
    }
  };
  const onPod = async (pod: PodName, kind: 'rest' | 'ws', tok: string): Promise<void> => {
    const before = stack.pods[pod].build.label;
    const address = stack.podAddress(pod);
    let status = 0;
    if (kind === 'ws') {
      status = await upgradeStatus(`ws://${address}/ws`, tok);
    } else {
      try {
        status = await me(`http://${address}`, tok);
      } catch {
        status = 0;
      }
    }
    const after = stack.pods[pod].build.label;
    count(answers, `${pod} ${kind} ${status}`);
    if (status !== 0 && before === after) count(servedBy, `${pod.replace(/-\d$/, '')} ${after}`);
    if ((kind === 'ws' && status === 101) || (kind === 'rest' && status >= 200 && status < 300)) {
      accepted.push(`${new Date().toISOString()} ${pod} (${before === after ? after : `${before} -> ${after}`}) accepted a ${kind === 'ws' ? 'WebSocket upgrade' : 'REST request'} (${status})`);
    }
  };
  const loop = (async () => {
    const until = Date.now() + 240_000;
    for (let round = 0; round < 20_000 && !stopped && Date.now() < until; round++) {
      const fresh = await t.token();
      await Promise.all([
        viaService('fresh', fresh),
        viaService('used', usedToken),
        ...(['gateway-0', 'gateway-1'] as const).flatMap((p) => [onPod(p, 'rest', fresh), onPod(p, 'ws', fresh)]),
        ...(['realtime-0', 'realtime-1'] as const).map((p) => onPod(p, 'ws', fresh)),
      ]);
      probes += 8;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    accepted,
    serviceErrors,
    answers,
    servedBy,
    get probes() {
      return probes;
    },
    /** Resolves once pods of each of `builds` of `service` answered `n` probes each (bounded by the time). */
    async answered(service: string, builds: string[], n: number, timeoutMs: number): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      for (let i = 0; i < 1000 && Date.now() < deadline && builds.some((b) => (servedBy.get(`${service} ${b}`) ?? 0) < n); i++) await new Promise((r) => setTimeout(r, 20));
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

describe('faults: a rolling upgrade from the previous release to this build, under traffic', () => {
  let stack: UpgradeStack | undefined;
  let checkout: ReleaseCheckout | undefined;
  let bootMs = 0;
  beforeAll(async () => {
    const t0 = Date.now();
    // The previous release is found and installed while the backends start.
    const build = findPreviousRelease()
      .then((release) => ReleaseCheckout.build(release))
      .then((c) => {
        checkout = c;
        // The ops listeners (and the manifests' probes on them) came with 0.2.0.
        return { label: c.release.version, dir: c.dir, opsOn: compareVersions(c.release.version, '0.2.0') < 0 ? 'public' : 'ops' } as const;
      });
    stack = await UpgradeStack.start({ build, env: { HISTORY_MAX_MESSAGES: '100000' } });
    bootMs = Date.now() - t0;
  }, 300_000);
  afterAll(async () => {
    const t0 = Date.now();
    await stack?.stop();
    const t1 = Date.now();
    await checkout?.remove();
    console.log(`[upgrade] teardown: the stack ${t1 - t0} ms, the worktree removed in ${Date.now() - t1} ms`);
  }, 120_000);

  it('previous release migrated and rolled pod by pod to this build: no 5xx but a retryable 503, nothing acknowledged lost (WebSocket resume and REST history), a disable in force on old and new pods alike', async () => {
    const s = stack!;
    const c = checkout!;
    const started = Date.now();
    const previous = c.release.version;
    const oldMigrations = migrationFiles(c.dir);
    const newMigrations = migrationFiles(REPO_ROOT);
    expect(newMigrations.slice(0, oldMigrations.length), 'migrations are only ever appended').toEqual(oldMigrations);
    expect(await appliedMigrations(s), `the database as ${previous} left it`).toEqual(oldMigrations);
    for (const pod of PODS) expect(s.pods[pod].build.label).toBe(previous);

    const a = await createTenant(s.registryUrl, s.gatewayUrl, s.adminToken);
    const b = await createTenant(s.registryUrl, s.gatewayUrl, s.adminToken);
    const channel = `upgrade-${randomUUID().slice(0, 8)}`;
    const topic = `tenants/${a.id}/channels/${channel}`;

    // The anchor every subscriber resumes from.
    const first = await fetch(`${s.gatewayUrl}/api/v1/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await a.token()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data: { n: -1 } }),
    });
    const firstBody = await first.text();
    expect(first.status, firstBody).toBe(201);
    const anchor = (JSON.parse(firstBody) as { id: string }).id;

    const subscribers = [0, 1, 2, 3, 4, 5].map((i) => new ResumingSubscriber(`${i % 2 === 0 ? 'gateway' : 'realtime'}#${i}`, i % 2 === 0 ? s.wsUrls.gateway : s.wsUrls.realtime, () => a.token(), topic, anchor));
    await Promise.all(subscribers.map((x) => x.start()));

    // Tenant b: a token the gateways have seen.
    const used = await b.token();
    expect(await me(s.gatewayUrl, used)).toBe(200);

    const rest = new RestTraffic(s.gatewayUrl, () => a.token(), channel);
    rest.start(2, 1);

    let probe: ReturnType<typeof probeDisabled> | undefined;
    let disable = '';
    let mixedRegistries = '';
    const failures: string[] = [];
    const mixed: Tenant[] = [];
    try {
      for (const pod of PODS) {
        const step = await s.restart(pod, CURRENT_BUILD);
        if (step.exitCode !== 0) failures.push(`${pod} (${step.from}) exited ${String(step.exitCode)} on SIGTERM`);
        if (pod === 'registry-0') {
          // This build's first registry migrated at its start; registry-1 and every other pod still run the previous release.
          expect(await appliedMigrations(s), 'the new migrations, applied by the first new registry').toEqual(newMigrations);
          const oldRegistry = `http://${s.podAddress('registry-1')}`;
          const newRegistry = `http://${s.podAddress('registry-0')}`;
          // An old pod restarted mid-rollout (or a rollback) starts on the migrated schema.
          const again = await s.restart('registry-1');
          if (again.exitCode !== 0) failures.push(`registry-1 (${again.from}) exited ${String(again.exitCode)} on SIGTERM`);
          expect(s.pods['registry-1'].build.label).toBe(previous);
          // Each registry writes a tenant the other reads, and old verifiers check its tokens.
          const byOld = await createTenant(oldRegistry, s.gatewayUrl, s.adminToken);
          const byNew = await createTenant(newRegistry, s.gatewayUrl, s.adminToken);
          mixed.push(byOld, byNew);
          const reads = await Promise.all([
            fetch(`${newRegistry}/admin/tenants/${byOld.id}`, { headers: { authorization: `Bearer ${s.adminToken}` } }),
            fetch(`${oldRegistry}/admin/tenants/${byNew.id}`, { headers: { authorization: `Bearer ${s.adminToken}` } }),
            fetch(`${oldRegistry}/admin/audit?limit=20`, { headers: { authorization: `Bearer ${s.adminToken}` } }),
          ]);
          expect(reads.map((r) => r.status), `${CURRENT_BUILD.label} reads a tenant ${previous} created, ${previous} one it created, ${previous} the audit log`).toEqual([200, 200, 200]);
          expect([await me(s.gatewayUrl, await byOld.token()), await me(s.gatewayUrl, await byNew.token())], `tokens of both tenants through ${previous}'s gateways and verifiers`).toEqual([200, 200]);
          mixedRegistries = `${previous}'s registry restarted on the migrated schema, tenants created by ${previous} and by ${CURRENT_BUILD.label} read by the other, their tokens accepted by ${previous}'s verifiers`;
        }
        if (pod === 'gateway-0') {
          // Midway: registries and verifiers new, one gateway new and one old, both realtime instances old.
          const pods = ['gateway-0', 'gateway-1', 'realtime-0', 'realtime-1'] as const;
          const live = await Promise.all(pods.map((p) => TestSocket.open(`ws://${s.podAddress(p)}/ws`, used)));
          const at = pods.map((p) => `${p} ${s.pods[p].build.label}`).join(', ');
          const res = await fetch(`${s.registryUrl}/admin/tenants/${b.id}/disable`, { method: 'POST', headers: { authorization: `Bearer ${s.adminToken}` } });
          const answeredAt = Date.now();
          disable = `disable ${res.status} with ${at}`;
          expect(res.status, await res.text()).toBe(200);
          probe = probeDisabled(s, b, used);
          const closes = await Promise.all(live.map((l) => l.closed(Math.max(1, answeredAt + 1000 - Date.now())).catch(() => undefined)));
          expect(closes, `the disabled tenant's connections on ${at} closed 4401 within 1 s of the 200`).toEqual([4401, 4401, 4401, 4401]);
          // The next step replaces the old gateway: first let both gateways answer the probes a while.
          await probe.answered('gateway', [previous, CURRENT_BUILD.label], 10, 15_000);
        }
      }
    } finally {
      await rest.stop();
      await probe?.stop();
    }
    // Every acknowledged publish reaches every subscriber (bounded wait: the last ones are in flight).
    const want = rest.acked.map((x) => x.id).sort(compareIds);
    const deadline = Date.now() + 10_000;
    for (let i = 0; i < 200 && Date.now() < deadline && subscribers.some((x) => x.ids.length < want.length); i++) await new Promise((r) => setTimeout(r, 50));
    await Promise.all(subscribers.map((x) => x.stop()));
    const stored = await history(s.gatewayUrl, await a.token(), channel, anchor);
    const afterRoll = await Promise.all(mixed.map(async (t) => me(s.gatewayUrl, await t.token())));
    const durationMs = Date.now() - started;

    const reconnects = subscribers.reduce((n, x) => n + x.reconnects, 0);
    const closeCodes = subscribers.flatMap((x) => x.closes);
    console.log(
      `[upgrade] ${previous} (commit ${c.release.commit.slice(0, 12)}, found by ${c.release.foundBy}) -> ${CURRENT_BUILD.label}: worktree ${c.timings.worktreeMs} ms, npm ci ${c.timings.installMs} ms, boot with the backends ${bootMs} ms; ` +
        `migrations applied under ${previous}: ${newMigrations.slice(oldMigrations.length).join(', ') || 'none'}; ${mixedRegistries}; ` +
        `${PODS.length} pods rolled (and registry-1 restarted on ${previous}) in ${durationMs} ms (${s.steps.map((x) => `${x.pod} ${x.from === x.to ? x.to : `${x.from}->${x.to}`} stop ${x.stopMs}/ready ${x.startMs} ms`).join(', ')}); ` +
        `REST: ${rest.sent} requests, ${rest.answered} answered, ${rest.noAnswer} without an answer (sent again), ${rest.retryable503.length} retryable 503, ${rest.bad.length} other errors, ${rest.acked.length} publishes acknowledged, ${stored.ids.length} in the REST history; ` +
        `WebSocket: ${subscribers.length} subscribers, ${reconnects} reconnects (closes ${[...new Set(closeCodes)].map((code) => `${code}×${closeCodes.filter((x) => x === code).length}`).join(' ')}; upgrades refused meanwhile: ${subscribers.flatMap((x) => x.refused).join(',') || 'none'}), ${subscribers.reduce((n, x) => n + x.ids.length, 0)} messages checked; ` +
        `disabled tenant: ${disable}, ${probe?.probes ?? 0} probes, answered by ${[...(probe?.servedBy ?? [])].map(([k, v]) => `${k}×${v}`).join(' ')} (${[...(probe?.answers ?? [])].map(([k, v]) => `${k}×${v}`).join(' ')}); ` +
        `Service refusals (no ready endpoint): ${Object.values(s.svc).map((x) => `${x.name} ${x.refused}`).join(', ')}`,
    );
    const upstreamLines = s.allLogs().split('\n').filter((l) => /upstream request failed/.test(l));
    if (upstreamLines.length > 0) console.log(`[upgrade] gateway upstream failures:\n${upstreamLines.slice(0, 10).join('\n')}`);
    if (rest.retryable503.length > 0) console.log(`[upgrade] retryable 503s: ${JSON.stringify(rest.retryable503.slice(0, 5))}`);

    expect(failures).toEqual([]);
    expect(s.crashed(), 'every pod is running').toEqual([]);
    for (const pod of PODS) expect(s.pods[pod].build, `${pod} runs this build`).toBe(CURRENT_BUILD);
    expect(rest.bad, 'no REST answer was a 5xx other than a 503 with Retry-After (or any other error)').toEqual([]);
    expect(rest.acked.length).toBeGreaterThan(50);
    expect(probe?.accepted, 'the disabled tenant was never accepted').toEqual([]);
    expect(probe?.serviceErrors, 'the disabled tenant\'s probes through the Services: no 5xx but a 503 with Retry-After').toEqual([]);
    for (const service of ['gateway', 'realtime']) {
      for (const build of [previous, CURRENT_BUILD.label]) expect(probe?.servedBy.get(`${service} ${build}`) ?? 0, `probes of the disabled tenant refused by a ${service} pod of ${build}`).toBeGreaterThan(5);
    }
    // Old and new verifiers share the Redis key cache: each opens what the other sealed.
    expect(s.allLogs().split('\n').filter((l) => /key cache entry failed to open/.test(l)), 'no key cache entry one build sealed failed to open on the other').toEqual([]);
    expect(afterRoll, 'the tenants both registries created, after the roll').toEqual([200, 200]);
    expect(stored.notRecovered, 'the REST history from the anchor is whole').toEqual([]);
    expect(stored.ids.filter((id, i) => stored.ids.indexOf(id) !== i), 'REST history: nothing stored twice').toEqual([]);
    expect(want.filter((id) => !stored.ids.includes(id)), 'REST history: every acknowledged publish stored').toEqual([]);
    for (const x of subscribers) {
      expect(x.doubles(), `${x.name}: nothing delivered twice`).toEqual([]);
      expect(x.ids.slice().sort(compareIds), `${x.name}: ids in order`).toEqual(x.ids);
      expect(want.filter((id) => !x.ids.includes(id)), `${x.name}: every acknowledged publish received`).toEqual([]);
      expect(x.notRecovered, `${x.name}: every resume said recovered: true`).toEqual([]);
      expect(x.closes.length, `${x.name}: its realtime instance was restarted, so it was closed and came back`).toBeGreaterThan(0);
      expect(x.reconnects, `${x.name}: reconnected after every close`).toBe(x.closes.length);
      // Only 1001 (going away): from a stopping realtime, and from a stopping gateway after the frame in progress (docs/OPERATIONS.md).
      for (const code of x.closes) expect([1001], `${x.name}: close ${code}`).toContain(code);
    }
  }, 240_000);

  it('every metric the alert rules and the dashboard query is in a live /metrics of this build (each pod\u2019s ops port); the public Services answer /metrics and /readyz 404', async () => {
    for (const base of [stack!.gatewayUrl, stack!.wsUrls.realtime.replace(/^ws/, 'http').replace(/\/ws$/, '')]) {
      for (const path of ['/metrics', '/readyz']) expect((await fetch(`${base}${path}`)).status, `${base}${path}`).toBe(404);
      expect((await fetch(`${base}/healthz`)).status, `${base}/healthz`).toBe(200);
    }
    const scraped = await stack!.scrapeAll();
    const names = new Set(scraped.flatMap(([, text]) => [...exposedNames(text)]));
    const missing = [...new Set(allExpressions().flatMap(serviceMetricNames))].filter((n) => !names.has(n));
    expect(missing).toEqual([]);
  });
});
