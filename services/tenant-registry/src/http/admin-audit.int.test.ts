import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { createTestDatabase, type TestDatabase } from '@service-relay/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

/** A TCP proxy in front of the test PostgreSQL: cut() is the registry's database going away, restore() it coming back. */
class CuttableProxy {
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;
  private up = true;
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = createServer((client) => {
      if (!this.up) return void client.destroy();
      const upstream = connect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
  }

  cut(): void {
    this.up = false;
    for (const s of this.sockets) s.destroy();
  }

  restore(): void {
    this.up = true;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

describe('admin audit log on PostgreSQL', () => {
  let database: TestDatabase;
  let proxy: CuttableProxy;
  let reg: TestRegistry;
  const nextToken = randomBytes(32).toString('base64url');

  beforeAll(async () => {
    database = await createTestDatabase('registry_audit_srv');
    const url = new URL(database.url);
    proxy = new CuttableProxy({ host: url.hostname, port: Number(url.port || 5432) });
    await proxy.start();
    url.host = `127.0.0.1:${proxy.port}`;
    reg = await startTestRegistry({ env: { DATABASE_URL: url.toString(), ADMIN_TOKEN_NEXT: nextToken } });
  });
  afterAll(async () => {
    await reg?.stop();
    await proxy?.close();
    await database?.drop();
  });

  async function rows(): Promise<Array<Record<string, unknown>>> {
    const c = new pg.Client({ connectionString: database.url });
    await c.connect();
    try {
      return (await c.query('SELECT row_to_json(a) AS row FROM admin_audit_log a ORDER BY id')).rows.map((r: { row: Record<string, unknown> }) => r.row);
    } finally {
      await c.end();
    }
  }

  it('records every call in PostgreSQL, with the migration applied and no secret in any row', async () => {
    const created = (await (await reg.admin('POST', '/admin/tenants')).json()) as Record<string, string>;
    const id = created.tenant_id!;
    expect((await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`, { headers: { authorization: `Bearer ${nextToken}` } })).status).toBe(200);
    expect((await fetch(`${reg.baseUrl}/admin/tenants/${id}`, { headers: { authorization: 'Bearer x' } })).status).toBe(401);
    const all = await rows();
    expect(all.map((r) => [r.actor, r.action, r.tenant_id, r.status, r.error])).toEqual([
      [expect.stringMatching(/^current:[0-9a-f]{8}$/), 'create', id, 201, null],
      [expect.stringMatching(/^next:[0-9a-f]{8}$/), 'revoke_all', id, 200, null],
      ['unauthenticated', 'get', id, 401, 'invalid_admin_token'],
    ]);
    const text = JSON.stringify(all);
    for (const secret of [reg.adminToken, nextToken, reg.internalToken, created.host_sync_client_secret!]) expect(text).not.toContain(secret);
  });

  it('answers as it would while PostgreSQL is down (503 unavailable, 401), logs the unwritten rows, and records again once it is back', async () => {
    const id = ((await (await reg.admin('POST', '/admin/tenants')).json()) as Record<string, string>).tenant_id!;
    const before = (await rows()).length;
    proxy.cut();
    try {
      const disable = await reg.admin('POST', `/admin/tenants/${id}/disable`, { headers: { 'x-request-id': 'outage-disable' } });
      expect(disable.status).toBe(503);
      expect(await disable.text()).toBe('{"errors":["unavailable"]}');
      const audit = await reg.admin('GET', '/admin/audit', { headers: { 'x-request-id': 'outage-audit' } });
      expect(audit.status).toBe(503);
      expect(audit.headers.get('cache-control')).toBe('no-store');
      const refused = await fetch(`${reg.baseUrl}/admin/tenants`, { headers: { authorization: 'Bearer nope', 'x-request-id': 'outage-401' } });
      expect(refused.status).toBe(401);
    } finally {
      proxy.restore();
    }
    const unwritten = reg
      .logs()
      .split('\n')
      .filter((l) => l.includes('admin call not recorded in the audit log'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(unwritten.map((l) => [l.req_id, l.status, l.error])).toEqual([
      ['outage-disable', 503, 'unavailable'],
      ['outage-audit', 503, 'unavailable'],
      ['outage-401', 401, 'invalid_admin_token'],
    ]);
    expect(reg.logs()).not.toContain('"status":500');

    expect((await reg.admin('POST', `/admin/tenants/${id}/disable`, { headers: { 'x-request-id': 'after-outage' } })).status).toBe(200);
    const after = await rows();
    expect(after.slice(before).map((r) => [r.request_id, r.action, r.status])).toEqual([['after-outage', 'disable', 200]]);
    for (const secret of [reg.adminToken, nextToken, reg.internalToken]) expect(reg.logs()).not.toContain(secret);
  });
});
