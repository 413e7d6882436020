import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { fetchSecret, signWithJose } from '../../support/host';
import { TestSocket, type Frame } from '../../support/ws-client';
import type { AdminResult, FaultStack } from './fault-stack';

/**
 * How a live connection of a revoked tenant may end: 4401 from the instance
 * that applied the change, or `1013 cut off` from an instance that could not
 * apply it because it lost its tenant feed past its lease and so stopped
 * vouching for every connection (docs/CONTRACT.md; the reason is realtime's
 * ws/feed-cutoff.ts CUT_OFF_REASON). Anything else, or still open, is a failure.
 */
export function revokedCloseLabel(s: TestSocket, code: number | undefined = s.closeCode): number | 'cut off' | 'open' {
  if (code === undefined) return 'open';
  return code === 1013 && s.closeReason === 'tenant feed lost: reconnect' ? 'cut off' : code;
}

export const closedAsRevoked = (label: number | 'cut off' | 'open') => label === 4401 || label === 'cut off';

/** Slack on top of the lease for timers and one poll round. */
export const GRACE_MS = 300;

const openSockets = new Set<TestSocket>();

/** Every socket a test opened through these helpers; closed by closeSockets(). */
export function closeSockets(): void {
  for (const s of openSockets) {
    if (s.closeCode === undefined) s.ws.terminate();
  }
  openSockets.clear();
}

export async function openSocket(url: string, token: string): Promise<TestSocket> {
  const s = await TestSocket.open(url, token);
  openSockets.add(s);
  return s;
}

/** Polls `probe` until it returns a value (bounded in time and rounds): for "eventually", where there is no event to await. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 20_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  const maxRounds = Math.ceil(timeoutMs / intervalMs) + 1;
  let last: unknown;
  for (let round = 0; round < maxRounds; round++) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${(last as Error).message})` : ''}`);
}

export const sleepUntil = (at: number) => new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));

/** Message ids are `<ms>-<seq>`, compared numerically. */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am !== bm ? (am < bm ? -1 : 1) : as === bs ? 0 : as < bs ? -1 : 1;
}

export function isIncreasing(ids: string[]): boolean {
  return ids.every((id, i) => i === 0 || compareIds(ids[i - 1]!, id) < 0);
}

/** A tenant as a host sees it: credentials, the current signing secret, tokens. */
export class Tenant {
  /** Every secret this tenant ever had, for the log check. */
  readonly secrets: string[] = [];

  private constructor(
    private readonly stack: FaultStack,
    readonly id: string,
    readonly clientId: string,
    public clientSecret: string,
    public jwtSecret: string,
  ) {
    this.secrets.push(clientSecret, jwtSecret);
  }

  static async create(stack: FaultStack): Promise<Tenant> {
    const r = await stack.admin('POST', '/admin/tenants');
    expect(r.status, r.text).toBe(201);
    const b = r.body as { tenant_id: string; host_sync_client_id: string; host_sync_client_secret: string };
    const res = await fetchSecret(stack.gatewayUrl, b.tenant_id, b.host_sync_client_id, b.host_sync_client_secret);
    expect(res.status).toBe(200);
    const secret = ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    return new Tenant(stack, b.tenant_id, b.host_sync_client_id, b.host_sync_client_secret, secret);
  }

  token(user: string = randomUUID(), lifetimeS = 900): Promise<string> {
    return signWithJose(this.jwtSecret, this.id, user, lifetimeS);
  }

  topic(channel = 'faults'): string {
    return `tenants/${this.id}/channels/${channel}`;
  }

  fetchSecret(clientSecret = this.clientSecret): Promise<Response> {
    return fetchSecret(this.stack.gatewayUrl, this.id, this.clientId, clientSecret);
  }

  /** After revoke_all: the new host-sync secret from the admin answer, and the new signing secret. */
  async adoptRevokeAll(result: AdminResult): Promise<void> {
    const secret = (result.body?.host_sync_client_secret ?? (result.body?.tenant as Record<string, unknown> | undefined)?.host_sync_client_secret) as string | undefined;
    if (secret) {
      this.clientSecret = secret;
      this.secrets.push(secret);
    }
    const res = await this.fetchSecret();
    if (res.status === 200) {
      this.jwtSecret = ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
      this.secrets.push(this.jwtSecret);
    }
  }
}

export async function gatewayMe(stack: FaultStack, token: string, timeoutMs = 5000): Promise<number> {
  try {
    const res = await fetch(`${stack.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(timeoutMs) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

export async function restPublish(stack: FaultStack, token: string, channel: string, data: unknown, timeoutMs = 5000, idempotencyKey = randomUUID()): Promise<{ status: number; id?: string }> {
  try {
    const res = await fetch(`${stack.gatewayUrl}/api/v1/channels/${channel}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify({ data }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = (await res.json().catch(() => ({}))) as { id?: string };
    return { status: res.status, ...(res.status === 201 && body.id ? { id: body.id } : {}) };
  } catch {
    return { status: 0 };
  }
}

let refs = 0;

/** A WS publish; resolves with the id on `published`, or the error code (`timeout` when nothing came). */
export async function wsPublish(sock: TestSocket, topic: string, data: unknown, timeoutMs = 5000, idempotencyKey = randomUUID()): Promise<{ id?: string; code?: string }> {
  const ref = `p${++refs}`;
  try {
    sock.send({ type: 'publish', topic, data, ref, idempotency_key: idempotencyKey });
    const f = await sock.next((x) => x.ref === ref && (x.type === 'published' || x.type === 'error'), timeoutMs);
    return f.type === 'published' ? { id: f.id as string } : { code: f.code as string };
  } catch (err) {
    return { code: sock.closeCode !== undefined ? `closed_${sock.closeCode}` : /within/.test((err as Error).message) ? 'timeout' : 'send_failed' };
  }
}

/** Subscribes; resolves with the `subscribed` frame, or the error frame. */
export async function subscribe(sock: TestSocket, topic: string, after?: string, epoch?: unknown, timeoutMs = 10_000): Promise<Frame> {
  const ref = `s${++refs}`;
  sock.send({ type: 'subscribe', topic, ref, ...(after !== undefined ? { after } : {}), ...(typeof epoch === 'string' && epoch !== '' ? { epoch } : {}) });
  return sock.next((f) => f.ref === ref && (f.type === 'subscribed' || f.type === 'error'), timeoutMs);
}

/** A WebSocket upgrade's outcome: 101 (the socket is dropped at once), the refusal's status, or 0. */
export async function upgradeStatus(url: string, token: string): Promise<number> {
  try {
    const s = await openSocket(url, token);
    s.ws.terminate();
    return 101;
  } catch (err) {
    return (err as { status?: number }).status ?? 0;
  }
}

/**
 * Everything through which a token or connection of `t` could be accepted,
 * tried once: a fresh token and one used before the change (possibly cached)
 * on the gateway and as a WebSocket upgrade on both realtime instances, a REST
 * publish, and the host-sync fetch. Returns what was accepted (empty: nothing).
 */
export async function acceptedNow(stack: FaultStack, t: Tenant, usedToken: string, opts: { fetch?: boolean } = {}): Promise<string[]> {
  const fresh = await t.token();
  const checks: Array<Promise<string | undefined>> = [
    gatewayMe(stack, fresh).then((s) => (s === 200 ? 'gateway accepted a fresh token' : undefined)),
    gatewayMe(stack, usedToken).then((s) => (s === 200 ? 'gateway accepted a token it had seen before' : undefined)),
    restPublish(stack, usedToken, 'faults', { probe: true }).then((r) => (r.status === 201 ? 'gateway/realtime acknowledged a REST publish' : undefined)),
    ...stack.realtimeWs.flatMap((url, i) => [
      upgradeStatus(url, fresh).then((s) => (s === 101 ? `realtime${i + 1} upgraded a fresh token` : undefined)),
      upgradeStatus(url, usedToken).then((s) => (s === 101 ? `realtime${i + 1} upgraded a token it had seen before` : undefined)),
    ]),
  ];
  if (opts.fetch !== false) {
    checks.push(t.fetchSecret().then(async (r) => (await r.text(), r.status === 200 ? 'host-sync fetch answered 200' : undefined)).catch(() => undefined));
  }
  return (await Promise.all(checks)).filter((x): x is string => x !== undefined);
}

/** Live connections that still get a publish acknowledged (a closed one, or one refused, is fine). */
export async function liveStillAccepted(t: Tenant, live: TestSocket[]): Promise<string[]> {
  const out: string[] = [];
  await Promise.all(live.map(async (s, i) => {
    if (s.closeCode !== undefined) return;
    const r = await wsPublish(s, t.topic(), { probe: 'live' }, 3000);
    if (r.id) out.push(`live connection #${i} still had a publish acknowledged`);
  }));
  return out;
}

export interface InForce {
  /** ms from the admin call until everything below held, or undefined if not by the deadline. */
  ms: number | undefined;
  gatewayMs: number | undefined;
  wsMs: [number | undefined, number | undefined];
  /** Per live socket: [close code, ms] (undefined while open). */
  closes: Array<[number | undefined, number | undefined]>;
}

/**
 * Measures, from now, when a change that revokes `t` is in force everywhere:
 * the gateway answers 401 to a fresh token and to one it saw before, both
 * realtime instances refuse a fresh token's upgrade with 401, and every live
 * connection of `t` is closed. Polls (bounded) until then or the deadline.
 */
export function watchInForce(stack: FaultStack, t: Tenant, usedToken: string, live: TestSocket[], deadlineMs = 15_000): { result(): Promise<InForce>; stop(): void } {
  const start = Date.now();
  const deadline = start + deadlineMs;
  let stopped = false;
  const poll = async (probe: () => Promise<boolean>): Promise<number | undefined> => {
    for (let round = 0; round < 2000 && !stopped && Date.now() < deadline; round++) {
      if (await probe()) return Date.now() - start;
      await new Promise((r) => setTimeout(r, 25));
    }
    return undefined;
  };
  const gateway = poll(async () => (await gatewayMe(stack, await t.token(), 2000)) === 401 && (await gatewayMe(stack, usedToken, 2000)) === 401);
  const ws = stack.realtimeWs.map((url) => poll(async () => (await upgradeStatus(url, await t.token())) === 401));
  const closes = live.map(async (s): Promise<[number | undefined, number | undefined]> => {
    try {
      const code = await s.closed(Math.max(1, deadline - Date.now()));
      return [code, Date.now() - start];
    } catch {
      return [undefined, undefined];
    }
  });
  return {
    stop: () => {
      stopped = true;
    },
    async result() {
      const [g, w0, w1, ...c] = await Promise.all([gateway, ...ws, ...closes]) as [number | undefined, number | undefined, number | undefined, ...Array<[number | undefined, number | undefined]>];
      const all = [g, w0, w1, ...c.map((x) => x[1])];
      const ms = all.every((x) => x !== undefined) ? Math.max(...(all as number[])) : undefined;
      return { ms, gatewayMs: g, wsMs: [w0, w1], closes: c };
    },
  };
}

export function describeInForce(f: InForce): string {
  const fmt = (x: number | undefined) => (x === undefined ? 'never' : `${x}`);
  return `in force after ${fmt(f.ms)} ms (gateway ${fmt(f.gatewayMs)}, upgrades ${fmt(f.wsMs[0])}/${fmt(f.wsMs[1])}, closes ${f.closes.map(([c, ms]) => `${c ?? '-'}@${fmt(ms)}`).join(' ')})`;
}

export function adminLabel(r: AdminResult): string {
  const code = Array.isArray(r.body?.errors) ? ` ${(r.body!.errors as string[]).join(',')}` : '';
  return `${r.status === 0 ? 'no answer' : r.status}${code} in ${r.ms} ms`;
}

/** The tenant's state version as committed in PostgreSQL (undefined while PostgreSQL cannot answer). */
export async function committedVersion(stack: FaultStack, t: Tenant): Promise<number | undefined> {
  try {
    const rows = await stack.postgres.query<{ version: number }>('SELECT version FROM tenants WHERE tenant_id = $1', [t.id]);
    return rows[0]?.version;
  } catch {
    return undefined;
  }
}

/**
 * The rule every fault test applies to an admin call that revokes `t`:
 * - 200: the change is in force at once: nothing of `t` is accepted, and
 *   every live connection closes with 4401 (or 1013 from an instance cut off
 *   from the tenant feed, which vouches for nothing) within one second;
 * - any other answer (503 change_not_propagated, no answer at all…) for a
 *   change that was committed (it shows in PostgreSQL, or the answer says
 *   change_not_propagated): once the lease has passed since the answer,
 *   nothing of `t` is accepted (live connections are closed or have their
 *   publishes refused);
 * - never a 500; a change_not_propagated answer carries the tenant view.
 * Returns what was asserted, for the log line.
 */
export async function expectRevocationHonoured(stack: FaultStack, t: Tenant, r: AdminResult, usedToken: string, live: TestSocket[], versionBefore: number | undefined, knownCommitted = false): Promise<string> {
  expect(r.status, `admin answered ${r.status}: ${r.text}`).not.toBe(500);
  if (r.status === 200) {
    // The contract's second for live connections counts from the answer.
    const closing = Promise.all(live.map((s) => s.closed(Math.max(1, r.answeredAt + 1000 - Date.now())).catch(() => undefined)));
    expect(await acceptedNow(stack, t, usedToken), 'after the 200, nothing of the tenant is accepted').toEqual([]);
    const labels = (await closing).map((code, i) => revokedCloseLabel(live[i]!, code));
    expect(labels.filter((l) => !closedAsRevoked(l)), `live connections closed 4401 (or 1013 by an instance cut off from the tenant feed) within 1 s of the 200: ${labels.join('/')}`).toEqual([]);
    return 'nothing accepted after the 200';
  }
  const errors = Array.isArray(r.body?.errors) ? (r.body!.errors as string[]) : [];
  if (errors.includes('change_not_propagated')) {
    expect(r.status).toBe(503);
    expect(r.body!.tenant, 'a change_not_propagated answer carries the tenant view').toMatchObject({ tenant_id: t.id });
  }
  const after = knownCommitted ? undefined : await committedVersion(stack, t);
  const committed = knownCommitted || errors.includes('change_not_propagated') || (after !== undefined && versionBefore !== undefined && after > versionBefore);
  if (!committed) return after === undefined ? 'not known whether it committed' : 'not committed';
  await sleepUntil(r.answeredAt + stack.leaseMs + GRACE_MS);
  const probe = async () => [...(await acceptedNow(stack, t, usedToken)), ...(await liveStillAccepted(t, live))];
  const accepted = await probe();
  if (accepted.length > 0) {
    // For the report: how long after the answer acceptance went on (bounded look).
    let until = 'still after 10 s';
    for (let i = 0; i < 100 && Date.now() < r.answeredAt + 10_000; i++) {
      if ((await probe()).length === 0) {
        until = `stopped ${Date.now() - r.answeredAt} ms after the answer`;
        break;
      }
      await new Promise((res) => setTimeout(res, 100));
    }
    expect(accepted, `once the lease (${stack.leaseMs} ms) has passed after a non-2xx for a committed change, nothing of the tenant is accepted (acceptance ${until})`).toEqual([]);
  }
  return 'committed; nothing accepted once the lease passed';
}

/** Valid traffic of `t` works again, end to end, without anyone's help: REST, both WebSocket instances, fan-out across them. */
export async function expectTrafficResumes(stack: FaultStack, t: Tenant, timeoutMs = 25_000): Promise<number> {
  const start = Date.now();
  const token = await t.token();
  await eventually('gateway serves a valid token', async () => (await gatewayMe(stack, token)) === 200, timeoutMs);
  await eventually('REST publish is acknowledged', async () => (await restPublish(stack, token, 'resume', { ok: 1 })).status === 201, timeoutMs);
  const socks = await eventually('both realtime instances accept a connection', async () => {
    const a = await openSocket(stack.realtimeWs[0], token);
    const b = await openSocket(stack.realtimeWs[1], token).catch((err: unknown) => {
      a.ws.terminate();
      throw err;
    });
    return [a, b] as const;
  }, timeoutMs);
  const [a, b] = socks;
  expect((await subscribe(a, t.topic('resume'))).type).toBe('subscribed');
  const pub = await eventually('a WebSocket publish on realtime2 is acknowledged', async () => (await wsPublish(b, t.topic('resume'), { across: true }, 3000)).id, timeoutMs);
  const got = await a.next((f) => f.type === 'message' && f.id === pub, 5000);
  expect(got.data).toEqual({ across: true });
  a.close();
  b.close();
  return Date.now() - start;
}

/** No secret, credential or token of the run reached any process's output. */
export function expectNoSecretsInLogs(stack: FaultStack, tenants: Tenant[]): void {
  const logs = stack.allLogs();
  for (const secret of [stack.adminToken, stack.internalToken, stack.secretsKey, ...tenants.flatMap((t) => t.secrets)]) {
    expect(logs.includes(secret), 'a secret appears in the logs').toBe(false);
  }
  expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./);
}

export function expectNoCrash(stack: FaultStack): void {
  const crashed = stack.crashed();
  expect(crashed.map((c) => `${c.name} exited ${String(c.code)}\n${c.tail}`)).toEqual([]);
}
