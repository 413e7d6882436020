import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchSecret, signWithJose } from '../support/host';
import { TestSocket } from '../support/ws-client';
import { allExpressions, exposedNames, serviceMetricNames } from '../deploy/promql';
import { compareIds } from './support/probes';
import { PODS, UpgradeStack } from './support/upgrade-stack';
import { ResumingSubscriber, RestTraffic } from './support/upgrade-traffic';

// Issue #16 item 4: a rolling upgrade loses nothing. The deployment of
// deploy/kubernetes (two replicas of each service, every peer reached
// through its Service) runs as processes; under steady REST and WebSocket
// traffic every pod in turn leaves its Services, gets SIGTERM, starts again
// and rejoins once ready. Midway a second tenant is disabled (admin 200) and
// probed until the end: its tokens must be refused on REST and WebSocket at
// every moment, by every pod, old or new.

interface Tenant {
  id: string;
  secret: string;
  token(user?: string): Promise<string>;
}

async function createTenant(stack: UpgradeStack): Promise<Tenant> {
  const res = await fetch(`${stack.registryUrl}/admin/tenants`, { method: 'POST', headers: { authorization: `Bearer ${stack.adminToken}` } });
  expect(res.status).toBe(201);
  const b = (await res.json()) as { tenant_id: string; host_sync_client_id: string; host_sync_client_secret: string };
  const f = await fetchSecret(stack.gatewayUrl, b.tenant_id, b.host_sync_client_id, b.host_sync_client_secret);
  expect(f.status).toBe(200);
  const secret = ((await f.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
  return { id: b.tenant_id, secret, token: (user = randomUUID()) => signWithJose(secret, b.tenant_id, user, 900) };
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

/** Probes, until stopped, that nothing of a revoked tenant is accepted: REST (fresh token, a token used before) and WebSocket upgrades through both Services. */
function probeRevoked(stack: UpgradeStack, t: Tenant, usedToken: string) {
  let stopped = false;
  const accepted: string[] = [];
  const answers = new Map<string, number>();
  let probes = 0;
  const count = (k: string) => answers.set(k, (answers.get(k) ?? 0) + 1);
  const loop = (async () => {
    const until = Date.now() + 240_000;
    for (let round = 0; round < 20_000 && !stopped && Date.now() < until; round++) {
      const fresh = await t.token();
      const rest = await Promise.all([fresh, usedToken].map(async (tok) => {
        try {
          const res = await fetch(`${stack.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${tok}` }, signal: AbortSignal.timeout(5000) });
          await res.arrayBuffer();
          return res.status;
        } catch {
          return 0;
        }
      }));
      const ws = await Promise.all([upgradeStatus(stack.wsUrls.gateway, fresh), upgradeStatus(stack.wsUrls.realtime, fresh)]);
      probes += 4;
      for (const [i, s] of rest.entries()) {
        count(`rest ${s}`);
        if (s >= 200 && s < 300) accepted.push(`${new Date().toISOString()} REST /api/v1/me answered ${s} to a ${i === 0 ? 'fresh' : 'used'} token`);
      }
      for (const [i, s] of ws.entries()) {
        count(`ws ${s}`);
        if (s === 101) accepted.push(`${new Date().toISOString()} WebSocket upgrade accepted through the ${i === 0 ? 'gateway' : 'realtime'} Service`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    accepted,
    answers,
    get probes() {
      return probes;
    },
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

describe('faults: a rolling upgrade of every service under traffic', () => {
  let stack: UpgradeStack | undefined;
  beforeAll(async () => {
    stack = await UpgradeStack.start();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('restarts every pod in turn: no 5xx but a retryable 503, every WebSocket resumes with nothing missed or doubled, a disabled tenant is never let in', async () => {
    const s = stack!;
    const started = Date.now();
    const a = await createTenant(s);
    const b = await createTenant(s);
    const channel = `upgrade-${randomUUID().slice(0, 8)}`;
    const topic = `tenants/${a.id}/channels/${channel}`;

    // The anchor every subscriber resumes from.
    const first = await fetch(`${s.gatewayUrl}/api/v1/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await a.token()}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data: { n: -1 } }),
    });
    expect(first.status).toBe(201);
    const anchor = ((await first.json()) as { id: string }).id;

    const subscribers = [0, 1, 2, 3, 4, 5].map((i) => new ResumingSubscriber(`${i % 2 === 0 ? 'gateway' : 'realtime'}#${i}`, i % 2 === 0 ? s.wsUrls.gateway : s.wsUrls.realtime, () => a.token(), topic, anchor));
    await Promise.all(subscribers.map((x) => x.start()));

    // Tenant b: a token the gateway has cached, and a live connection through each Service.
    const used = await b.token();
    expect((await fetch(`${s.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${used}` } })).status).toBe(200);
    const live = [await TestSocket.open(s.wsUrls.gateway, used), await TestSocket.open(s.wsUrls.realtime, used)];

    const rest = new RestTraffic(s.gatewayUrl, () => a.token(), channel);
    rest.start(2, 1);

    let probe: ReturnType<typeof probeRevoked> | undefined;
    let disable = '';
    const failures: string[] = [];
    try {
      for (const pod of PODS) {
        const step = await s.restart(pod);
        if (step.exitCode !== 0) failures.push(`${pod} exited ${String(step.exitCode)} on SIGTERM`);
        if (pod === 'verifier-1') {
          // Midway: the verifiers and registries are new, the gateways and realtime instances still old.
          const res = await fetch(`${s.registryUrl}/admin/tenants/${b.id}/disable`, { method: 'POST', headers: { authorization: `Bearer ${s.adminToken}` } });
          const answeredAt = Date.now();
          disable = `disable ${res.status}`;
          expect(res.status, await res.text()).toBe(200);
          probe = probeRevoked(s, b, used);
          const closes = await Promise.all(live.map((l) => l.closed(Math.max(1, answeredAt + 1000 - Date.now())).catch(() => undefined)));
          expect(closes, 'the disabled tenant\'s live connections closed 4401 within 1 s of the 200').toEqual([4401, 4401]);
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
    const durationMs = Date.now() - started;

    const reconnects = subscribers.reduce((n, x) => n + x.reconnects, 0);
    const closeCodes = subscribers.flatMap((x) => x.closes);
    console.log(
      `[upgrade] ${PODS.length} pods restarted in ${durationMs} ms (${s.steps.map((x) => `${x.pod} stop ${x.stopMs}/ready ${x.startMs} ms`).join(', ')}); ` +
        `REST: ${rest.sent} requests, ${rest.answered} answered, ${rest.noAnswer} without an answer (sent again), ${rest.retryable503.length} retryable 503, ${rest.bad.length} other errors, ${rest.acked.length} publishes acknowledged; ` +
        `WebSocket: ${subscribers.length} subscribers, ${reconnects} reconnects (closes ${[...new Set(closeCodes)].map((c) => `${c}×${closeCodes.filter((x) => x === c).length}`).join(' ')}; upgrades refused meanwhile: ${subscribers.flatMap((x) => x.refused).join(',') || 'none'}), ${subscribers.reduce((n, x) => n + x.ids.length, 0)} messages checked; ` +
        `revoked tenant: ${disable}, ${probe?.probes ?? 0} probes (${[...(probe?.answers ?? [])].map(([k, v]) => `${k}×${v}`).join(' ')}); ` +
        `Service refusals (no ready endpoint): ${Object.values(s.svc).map((x) => `${x.name} ${x.refused}`).join(', ')}`,
    );
    const upstreamLines = s.allLogs().split('\n').filter((l) => /upstream request failed/.test(l));
    if (upstreamLines.length > 0) console.log(`[upgrade] gateway upstream failures:\n${upstreamLines.slice(0, 10).join('\n')}`);
    if (rest.retryable503.length > 0) console.log(`[upgrade] retryable 503s: ${JSON.stringify(rest.retryable503.slice(0, 5))}`);

    expect(failures).toEqual([]);
    expect(s.crashed(), 'every pod is running').toEqual([]);
    expect(rest.bad, 'no REST answer was a 5xx other than a 503 with Retry-After (or any other error)').toEqual([]);
    expect(rest.acked.length).toBeGreaterThan(50);
    expect(probe?.accepted, 'the disabled tenant was never accepted').toEqual([]);
    expect(probe!.probes).toBeGreaterThan(20);
    for (const x of subscribers) {
      expect(x.doubles(), `${x.name}: nothing delivered twice`).toEqual([]);
      expect(x.ids.slice().sort(compareIds), `${x.name}: ids in order`).toEqual(x.ids);
      expect(want.filter((id) => !x.ids.includes(id)), `${x.name}: every acknowledged publish received`).toEqual([]);
      expect(x.notRecovered, `${x.name}: every resume said recovered: true`).toEqual([]);
      expect(x.closes.length, `${x.name}: its realtime instance was restarted, so it was closed and came back`).toBeGreaterThan(0);
      expect(x.reconnects, `${x.name}: reconnected after every close`).toBe(x.closes.length);
      // Only 1001 (going away): from a stopping realtime, and from a stopping gateway after the frame in progress (docs/OPERATIONS.md).
      for (const c of x.closes) expect([1001], `${x.name}: close ${c}`).toContain(c);
    }
  }, 240_000);

  it('every metric the alert rules and the dashboard query is in a live /metrics (each pod\u2019s ops port); the public Services answer /metrics and /readyz 404', async () => {
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
