import { randomUUID } from 'node:crypto';
import { signToken, TEST_REDIS_URL } from '@service-relay/testkit';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basic, createTenantWithSecret, fetchSecret, type CreatedTenant } from './support/host';
import { startStack, type Stack } from './support/stack';
import { TestSocket } from './support/ws-client';

const UNAUTHORIZED_FETCH = '{"errors":["invalid_host_sync_credentials"]}';
/** The per-tenant tables of PostgreSQL (services/tenant-registry/src/store/tenant-deletion.ts PURGE_STEPS). */
const TENANT_TABLES = ['tenant_channel_rules', 'user_revocations', 'tenant_limits', 'tenant_callbacks', 'webhook_endpoints', 'tenant_usage', 'tenant_usage_peaks', 'tenant_usage_refusals'];

// DELETE /admin/tenants/{id} (#30 item 4) across the whole stack: every
// service its own process, two realtime instances (the gateway sends REST to
// both in turn) on one Redis and PostgreSQL. Tenant A gets data of every
// kind on both instances, is deleted, and is gone everywhere; tenant B is
// untouched.
describe('deleting a tenant across the whole stack', () => {
  let stack: Stack;
  let redis: Redis;
  let db: pg.Client;
  let a: { tenant: CreatedTenant; secret: string };
  let b: { tenant: CreatedTenant; secret: string };
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    // Usage flushed every second, so A has usage rows to purge.
    stack = await startStack({ gatewayToBothRealtimes: true, realtimeEnv: { USAGE_FLUSH_INTERVAL_S: '1' } });
    redis = new Redis(TEST_REDIS_URL);
    db = new pg.Client({ connectionString: stack.databaseUrl });
    await db.connect();
    a = await createTenantWithSecret(stack);
    b = await createTenantWithSecret(stack);
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    redis?.disconnect();
    await db?.end();
    await stack?.stop();
  });

  const nowS = () => Math.floor(Date.now() / 1000);
  const sign = (t: { tenant: CreatedTenant; secret: string }, userId = randomUUID()) => signToken({ secret: t.secret, tenantId: t.tenant.tenant_id, userId, exp: nowS() + 300, claims: { iat: nowS() - 5 } });
  const topic = (t: { tenant: CreatedTenant }, channel: string) => `tenants/${t.tenant.tenant_id}/channels/${channel}`;
  const adminCall = (method: string, path: string, body?: unknown) =>
    fetch(`${stack.registryUrl}/admin${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.adminToken}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const rest = (token: string, path: string, init: RequestInit = {}) => fetch(`${stack.gatewayUrl}/api/v1${path}`, { ...init, headers: { authorization: `Bearer ${token}`, ...init.headers } });
  /** A connection on one instance, subscribed to `channels` (a presence channel with a member). */
  const open = async (instance: number, t: { tenant: CreatedTenant; secret: string }, channels: string[]) => {
    const s = await TestSocket.open(stack.realtimeWs[instance]!, sign(t));
    sockets.push(s);
    for (const c of channels) {
      s.send({ type: 'subscribe', topic: topic(t, c), ref: c, ...(c.startsWith('presence:') && { member: { instance } }) });
      expect(await s.next((f) => f.ref === c)).toMatchObject({ type: 'subscribed' });
    }
    return s;
  };
  const publish = async (s: TestSocket, t: { tenant: CreatedTenant }, channel: string, data: unknown) => {
    const ref = randomUUID();
    s.send({ type: 'publish', topic: topic(t, channel), data, ref });
    expect(await s.next((f) => f.ref === ref)).toMatchObject({ type: 'published' });
  };
  /** Every Redis key of this stack that names the tenant. */
  const redisKeysOf = async (tenantId: string): Promise<string[]> => {
    const found: string[] = [];
    let cursor = '0';
    for (let i = 0; i < 100_000; i++) {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${stack.redisPrefix}*`, 'COUNT', 1000);
      found.push(...keys.filter((k) => k.includes(tenantId)));
      cursor = next;
      if (cursor === '0') break;
    }
    return found.map((k) => k.slice(stack.redisPrefix.length)).sort();
  };
  /** relay_realtime_tenant_purges_total{outcome="done"} of a realtime instance (its ops listener's /metrics). */
  const purgesDone = async (name: string): Promise<number> => {
    const text = await (await fetch(stack.health[name]!.replace('/healthz', '/metrics'))).text();
    return Number(/^relay_realtime_tenant_purges_total\{outcome="done"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
  };
  const rowsOf = async (tenantId: string): Promise<Record<string, unknown[]>> => {
    const out: Record<string, unknown[]> = {};
    for (const table of TENANT_TABLES) out[table] = (await db.query(`SELECT * FROM ${table} WHERE tenant_id = $1`, [tenantId])).rows;
    return out;
  };

  it('deletes A for good: in force on both instances at the 200, every kind of its data gone from PostgreSQL and Redis, B untouched', async () => {
    const A = a.tenant.tenant_id;
    const B = b.tenant.tenant_id;
    // A: rules, a user revocation, connections with history and presence on both instances, REST history with an idempotency key.
    expect((await adminCall('PUT', `/tenants/${A}/channel_rules`, { default: ['subscribe', 'publish', 'history'], channels: [{ pattern: 'presence:*', actions: ['subscribe', 'presence'], presence: true }] })).status).toBe(200);
    expect((await adminCall('POST', `/tenants/${A}/users/${randomUUID()}/revoke_tokens`, {})).status).toBe(200);
    const onOne = await open(0, a, ['one', 'presence:lobby']);
    const onTwo = await open(1, a, ['two', 'presence:lobby']);
    await publish(onOne, a, 'one', { n: 1 });
    await publish(onTwo, a, 'two', { n: 2 });
    const token = sign(a);
    for (let i = 0; i < 2; i++) {
      const res = await rest(token, `/channels/rest${i}/messages`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': `k${i}` }, body: JSON.stringify({ data: i }) });
      expect(res.status).toBe(201);
    }
    expect((await rest(token, '/me')).status).toBe(200);
    // B: a connection on instance 2 and its history.
    const bSocket = await open(1, b, ['news']);
    await publish(bSocket, b, 'news', { hello: 'B' });

    const keysBefore = await redisKeysOf(A);
    const bKeysBefore = await redisKeysOf(B);
    // History streams (and meta, idempotency keys) of four channels, presence on both instances, the connection count, the verifier's key cache.
    for (const family of ['ch:{', 'presence:{', 'tenant-conns:{', '{verifier}:keys:']) expect(keysBefore.some((k) => k.startsWith(family)), family).toBe(true);
    expect(keysBefore.filter((k) => k.includes('/idem/'))).toHaveLength(2);
    // Its callbacks (#32: asked for no channel it uses) and a webhook endpoint (nothing listens there: its events stay queued).
    expect((await adminCall('PUT', `/tenants/${A}/callbacks`, { url: 'http://127.0.0.1:9/relay', subscribe: ['never-used'] })).status).toBe(200);
    expect((await adminCall('POST', `/tenants/${A}/webhooks`, { url: 'http://127.0.0.1:9/hook', events: ['member_added', 'user_connected'] })).status).toBe(201);
    // Its own limits, and usage (with a refusal: a message over its largest) flushed by both instances.
    expect((await adminCall('PUT', `/tenants/${A}/limits`, { overrides: { max_message_bytes: 1024 } })).status).toBe(200);
    const tooLarge = await rest(token, '/channels/rest0/messages', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ data: 'x'.repeat(2000) }) });
    expect(tooLarge.status).toBe(413);
    for (let i = 0; i < 100; i++) {
      const rows = await rowsOf(A);
      if (rows.tenant_usage!.length > 0 && rows.tenant_usage_peaks!.length >= 2 && rows.tenant_usage_refusals!.length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(Object.values(await rowsOf(A)).map((r) => r.length > 0)).toEqual(TENANT_TABLES.map(() => true));

    // The CLI will not delete without a confirmation: no terminal here, so --yes is required.
    const refused = await stack.adminProcess('delete-tenant', A);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--yes');
    expect((await adminCall('GET', `/tenants/${A}`)).status).toBe(200);

    const deleted = await stack.adminProcess('delete-tenant', A, '--yes');
    expect(deleted.code, deleted.stderr).toBe(0);
    expect(deleted.stderr).toContain(`deleting tenant ${A}`);
    expect(deleted.stderr).toContain('in force on every instance');
    const view = JSON.parse(deleted.stdout) as Record<string, unknown>;
    expect(view).toEqual({ tenant_id: A, deleted: true, deleted_at: expect.any(String), usage_kept: false, purged: { tenant_channel_rules: 1, user_revocations: 1, tenant_limits: 1, tenant_callbacks: 1, tenant_usage: expect.any(Number), tenant_usage_peaks: expect.any(Number), tenant_usage_refusals: expect.any(Number), webhook_attempts: expect.any(Number), webhook_deliveries: expect.any(Number), webhook_endpoints: 1 } });

    // At the 200 A's rows are gone from PostgreSQL (one transaction with the tombstone), its connections closed
    // and its tokens refused on both instances, and each instance has begun purging; wait for both to report it done.
    const purgedAt = Date.now();
    await expect.poll(async () => Promise.all(['realtime1', 'realtime2'].map(purgesDone)), { timeout: 10_000, interval: 20 }).toEqual([1, 1]);
    const purgeMs = Date.now() - purgedAt;
    const keysAfter = await redisKeysOf(A);
    // Left: only the verifier's version floor (a number, no secret; it expires) that keeps a stale key entry from coming back.
    expect(keysAfter).toEqual([`{verifier}:floor:${A}`]);
    const floorTtl = await redis.pttl(`${stack.redisPrefix}{verifier}:floor:${A}`);
    expect(floorTtl).toBeGreaterThan(0);
    expect(floorTtl).toBeLessThanOrEqual(600_000);
    expect(await redis.get(`${stack.redisPrefix}{verifier}:floor:${A}`)).toMatch(/^\d+$/);
    // No instance's presence set names a channel of A any more.
    const instanceSets = (await redis.keys(`${stack.redisPrefix}presence:instance:*`)).filter((k) => !k.includes('*'));
    for (const set of instanceSets) expect((await redis.smembers(set)).filter((m) => m.startsWith(A))).toEqual([]);
    expect(await rowsOf(A)).toEqual(Object.fromEntries(TENANT_TABLES.map((t) => [t, []])));
    const tomb = (await db.query('SELECT * FROM tenants WHERE tenant_id = $1', [A])).rows[0] as Record<string, unknown>;
    expect(tomb).toMatchObject({ primary_secret: null, previous_secret: null, host_sync_secret_hash: null, name: null, labels: {}, disabled: true });
    expect(tomb.deleted_at).toBeInstanceOf(Date);
    console.log(`deleted tenant: both instances purged within ${purgeMs} ms of the 200; Redis keys before ${keysBefore.length} (${keysBefore.join(', ')}), after ${keysAfter.length}; PostgreSQL rows after: ${JSON.stringify(await rowsOf(A))}`);

    // A's live connections on both instances were closed with disable's code.
    expect(await onOne.closed(1000)).toBe(4401);
    expect(await onTwo.closed(1000)).toBe(4401);
    // A's tokens are refused on REST and WebSocket, its host-sync credential too.
    const me = await rest(token, '/me');
    expect(me.status).toBe(401);
    expect(await me.text()).toBe('{"errors":["invalid_or_missing_token"]}');
    for (const ws of stack.realtimeWs) await expect(TestSocket.open(ws, sign(a))).rejects.toMatchObject({ status: 401 });
    const fetched = await fetchSecret(stack.gatewayUrl, A, a.tenant.host_sync_client_id, a.tenant.host_sync_client_secret);
    expect(fetched.status).toBe(401);
    expect(await fetched.text()).toBe(UNAUTHORIZED_FETCH);
    const hostPublish = await fetch(`${stack.gatewayUrl}/api/host/tenants/${A}/messages`, {
      method: 'POST',
      headers: { authorization: basic(a.tenant.host_sync_client_id, a.tenant.host_sync_client_secret), 'content-type': 'application/json' },
      body: JSON.stringify({ channels: ['one'], data: 1 }),
    });
    expect(hostPublish.status).toBe(401);

    // B: its connection is open, its history readable, its keys still there.
    expect(bSocket.closeCode).toBeUndefined();
    await publish(bSocket, b, 'news', { still: 'here' });
    const history = await rest(sign(b), '/channels/news/messages');
    expect(((await history.json()) as { messages: Array<{ data: unknown }> }).messages.map((m) => m.data)).toEqual([{ hello: 'B' }, { still: 'here' }]);
    expect(await redisKeysOf(B)).toEqual(expect.arrayContaining(bKeysBefore.filter((k) => k.startsWith('ch:{'))));
  });

  it('answers a second DELETE with the same shape, every other call on the id with 404, keeps the audit record and never reuses the id', async () => {
    const A = a.tenant.tenant_id;
    const again = await adminCall('DELETE', `/tenants/${A}`);
    expect(again.status, await again.clone().text()).toBe(200);
    const view = (await again.json()) as Record<string, unknown>;
    expect(view).toEqual({ tenant_id: A, deleted: true, deleted_at: expect.any(String), usage_kept: false, purged: { tenant_channel_rules: 0, user_revocations: 0, tenant_limits: 0, tenant_callbacks: 0, tenant_usage: 0, tenant_usage_peaks: 0, tenant_usage_refusals: 0, webhook_attempts: 0, webhook_deliveries: 0, webhook_endpoints: 0 } });
    const [row] = (await db.query('SELECT deleted_at FROM tenants WHERE tenant_id = $1', [A])).rows as Array<{ deleted_at: Date }>;
    expect(view.deleted_at).toBe(row!.deleted_at.toISOString());

    for (const [method, path] of [
      ['GET', ''],
      ['PATCH', ''],
      ['POST', '/disable'],
      ['POST', '/enable'],
      ['POST', '/jwt_secret/rotate'],
      ['POST', '/host_sync/rotate'],
      ['GET', '/channel_rules'],
      ["POST", `/users/${randomUUID()}/disconnect`],
    ] as const) {
      const res = await adminCall(method, `/tenants/${A}${path}`, method === 'PATCH' ? { name: 'back' } : undefined);
      expect([method, path, res.status, await res.text()]).toEqual([method, path, 404, '{"errors":["tenant_not_found"]}']);
    }
    const list = (await (await adminCall('GET', '/tenants?limit=100')).json()) as { tenants: Array<{ tenant_id: string }> };
    expect(list.tenants.map((t) => t.tenant_id)).not.toContain(A);
    expect(list.tenants.map((t) => t.tenant_id)).toContain(b.tenant.tenant_id);

    const audit = (await (await adminCall('GET', `/audit?tenant_id=${A}`)).json()) as { entries: Array<{ action: string; status: number; method: string }> };
    expect(audit.entries.filter((e) => e.action === 'delete').map((e) => [e.method, e.status])).toEqual([
      ['DELETE', 200],
      ['DELETE', 200],
    ]);

    const fresh: string[] = [];
    for (let i = 0; i < 3; i++) fresh.push(((await (await adminCall('POST', '/tenants')).json()) as { tenant_id: string }).tenant_id);
    expect(fresh).not.toContain(A);
    // Nothing of A came back meanwhile (late leaves, connection count writes of the closed sockets).
    expect(await redisKeysOf(A)).toEqual([`{verifier}:floor:${A}`]);
    await expect(db.query("INSERT INTO tenants (tenant_id, host_sync_client_id, host_sync_secret_hash, version, primary_key_version, primary_secret, created_at, updated_at) VALUES ($1, 'hs_again', 'h', 1, 1, 'v1.x', now(), now())", [A])).rejects.toThrow(/duplicate key/);
  });
});
