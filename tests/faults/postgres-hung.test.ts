import { describe, expect, it } from 'vitest';
import type { FaultStack } from './support/fault-stack';
import { eventually, gatewayMe } from './support/probes';
import { finalChecks, useFaultStack } from './support/suite';

/** How long PostgreSQL stays hung: past pg's former 5 s read timeout and its 5 s rollback, so the old 500s would show. */
const HUNG_MS = 15_000;
/** A batch of calls goes out this often while it is hung. */
const BATCH_EVERY_MS = 1000;
/** The answer bound of issue #28 item 4 for admin and host-sync calls while PostgreSQL is hung. */
const ANSWER_WITHIN_MS = 1000;

interface Answer {
  name: string;
  status: number;
  text: string;
  ms: number;
}

/** One call straight to the registry's HTTP port, timed from send to the end of the body. */
async function call(stack: FaultStack, name: string, method: string, path: string, authorization: string): Promise<Answer> {
  const sentAt = performance.now();
  try {
    const res = await fetch(`${stack.registryUrl}${path}`, { method, headers: { authorization }, signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    return { name, status: res.status, text, ms: Math.round(performance.now() - sentAt) };
  } catch (err) {
    return { name, status: 0, text: (err as Error).message, ms: Math.round(performance.now() - sentAt) };
  }
}

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

// The registry's PostgreSQL hung: every one of its processes SIGSTOPped (sockets open, nothing answers), then SIGCONTed.
describe('faults: PostgreSQL hung (SIGSTOP) and resumed', () => {
  const suite = useFaultStack();

  it('while PostgreSQL is hung every admin call and host-sync fetch answers 503 unavailable within 1 s, never 500; after SIGCONT they succeed again', async () => {
    const { stack, bystander: t } = suite;
    const admin = `Bearer ${stack.adminToken}`;
    const good = basic(t.clientId, t.clientSecret);
    const wrong = basic(t.clientId, 'not-the-secret');
    const batch = (): Array<Promise<Answer>> => [
      call(stack, 'disable', 'POST', `/admin/tenants/${t.id}/disable`, admin),
      call(stack, 'revoke_all', 'POST', `/admin/tenants/${t.id}/jwt_secret/revoke_all`, admin),
      call(stack, 'create', 'POST', '/admin/tenants', admin),
      call(stack, 'get', 'GET', `/admin/tenants/${t.id}`, admin),
      call(stack, 'list', 'GET', '/admin/tenants', admin),
      call(stack, 'audit', 'GET', '/admin/audit', admin),
      call(stack, 'fetch', 'POST', `/api/host/tenants/${t.id}/jwt_secret/fetch`, good),
      call(stack, 'fetch_wrong', 'POST', `/api/host/tenants/${t.id}/jwt_secret/fetch`, wrong),
    ];
    // Warm: the registry's pool holds connections to the server that is about to hang.
    const warm = await Promise.all([
      call(stack, 'get', 'GET', `/admin/tenants/${t.id}`, admin),
      call(stack, 'list', 'GET', '/admin/tenants', admin),
      call(stack, 'fetch', 'POST', `/api/host/tenants/${t.id}/jwt_secret/fetch`, good),
      call(stack, 'fetch_wrong', 'POST', `/api/host/tenants/${t.id}/jwt_secret/fetch`, wrong),
    ]);
    expect(warm.map((a) => a.status)).toEqual([200, 200, 200, 401]);

    const stopped = stack.postgres.freeze();
    const hungAt = Date.now();
    const answers: Array<Promise<Answer>> = [];
    // Bounded: HUNG_MS / BATCH_EVERY_MS batches.
    for (let i = 0; i < HUNG_MS / BATCH_EVERY_MS; i++) {
      answers.push(...batch());
      await new Promise((r) => setTimeout(r, BATCH_EVERY_MS));
    }
    // Every call sent while hung has answered (or failed) before PostgreSQL resumes.
    const hung = await Promise.all(answers);
    const hungForMs = Date.now() - hungAt;
    stack.postgres.resume();
    const resumedAt = Date.now();

    const backMs = await eventually(
      'admin and host-sync calls succeed again',
      async () => {
        const [get, fetched] = await Promise.all([call(stack, 'get', 'GET', `/admin/tenants/${t.id}`, admin), call(stack, 'fetch', 'POST', `/api/host/tenants/${t.id}/jwt_secret/fetch`, good)]);
        return get.status === 200 && fetched.status === 200 ? Date.now() - resumedAt : undefined;
      },
      15_000,
      100,
    );
    const created = await call(stack, 'create', 'POST', '/admin/tenants', admin);
    const me = await gatewayMe(stack, await t.token());

    const byStatus = new Map<string, number>();
    for (const a of hung) byStatus.set(`${a.status}`, (byStatus.get(`${a.status}`) ?? 0) + 1);
    const ms = hung.map((a) => a.ms).sort((a, b) => a - b);
    console.log(
      `[faults] postgres hung ${hungForMs} ms (${stopped} processes stopped) | ${hung.length} calls: ${[...byStatus].map(([s, n]) => `${n}x ${s}`).join(', ')}; ` +
        `answer ms p50 ${ms[Math.floor(ms.length / 2)]} max ${ms[ms.length - 1]} | back ${backMs} ms after SIGCONT; create after: ${created.status}; bystander /me after: ${me}`,
    );
    const slowOrWrong = hung.filter((a) => a.status !== 503 || a.text !== '{"errors":["unavailable"]}' || a.ms >= ANSWER_WITHIN_MS);
    expect(slowOrWrong.map((a) => `${a.name}: ${a.status} ${a.text.slice(0, 80)} in ${a.ms} ms`), 'every call answers 503 unavailable within 1 s').toEqual([]);
    expect(created.status, created.text).toBe(201);
    expect(me).toBe(200);
  });

  it('no process crashed and no secret or token reached any log', () => {
    finalChecks(suite);
  });
});
