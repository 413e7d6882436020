import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';
import type { AuditEntryView } from './audit-view';

const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';
const fingerprint = (token: string) => createHash('sha256').update(token).digest('hex').slice(0, 8);

interface AuditPage {
  entries: AuditEntryView[];
  next_cursor: string | null;
}

async function auditPage(reg: TestRegistry, query = ''): Promise<AuditPage> {
  const res = await reg.admin('GET', `/admin/audit${query}`);
  expect(res.status, await res.clone().text()).toBe(200);
  expect(res.headers.get('cache-control')).toBe('no-store');
  return (await res.json()) as AuditPage;
}

async function create(reg: TestRegistry, headers: Record<string, string> = {}): Promise<Record<string, string>> {
  const res = await reg.admin('POST', '/admin/tenants', { headers });
  expect(res.status).toBe(201);
  return (await res.json()) as Record<string, string>;
}

describe('admin audit log', () => {
  let reg: TestRegistry;
  const nextToken = randomBytes(32).toString('base64url');
  let current: string;
  let next: string;

  beforeAll(async () => {
    reg = await startTestRegistry({ env: { ADMIN_TOKEN_NEXT: nextToken, PROPAGATION_TIMEOUT_MS: '600' } });
    current = `current:${fingerprint(reg.adminToken)}`;
    next = `next:${fingerprint(nextToken)}`;
  });
  afterAll(async () => {
    await reg?.stop();
  });

  it('accepts ADMIN_TOKEN and ADMIN_TOKEN_NEXT, refuses anything else, and says which token was used', async () => {
    const byCurrent = await reg.admin('GET', '/admin/tenants', { headers: { 'x-request-id': 'rot-current' } });
    const byNext = await reg.admin('GET', '/admin/tenants', { headers: { authorization: `Bearer ${nextToken}`, 'x-request-id': 'rot-next' } });
    expect([byCurrent.status, byNext.status]).toEqual([200, 200]);
    for (const wrong of [`${nextToken}x`, nextToken.slice(1), randomBytes(32).toString('base64url')]) {
      const res = await reg.admin('GET', '/admin/tenants', { headers: { authorization: `Bearer ${wrong}`, 'x-request-id': 'rot-wrong' } });
      expect(res.status).toBe(401);
      expect(await res.text()).toBe('{"errors":["invalid_admin_token"]}');
    }
    const { entries } = await auditPage(reg, '?limit=100');
    const rot = entries.filter((e) => e.request_id.startsWith('rot-'));
    expect(rot.map((e) => [e.request_id, e.actor, e.action, e.status, e.error])).toEqual([
      ['rot-wrong', 'unauthenticated', 'list', 401, 'invalid_admin_token'],
      ['rot-wrong', 'unauthenticated', 'list', 401, 'invalid_admin_token'],
      ['rot-wrong', 'unauthenticated', 'list', 401, 'invalid_admin_token'],
      ['rot-next', next, 'list', 200, null],
      ['rot-current', current, 'list', 200, null],
    ]);
  });

  it('records create, disable and revoke_all: who, when, what, which tenant, outcome, request id and address', async () => {
    const before = Date.now();
    const t = await create(reg, { 'x-request-id': 'audit-create' });
    const id = t.tenant_id!;
    expect((await reg.admin('POST', `/admin/tenants/${id}/disable`, { headers: { authorization: `Bearer ${nextToken}` } })).status).toBe(200);
    const revoked = await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`);
    expect(revoked.status).toBe(200);
    const revokeRequestId = revoked.headers.get('x-request-id');
    const { entries, next_cursor } = await auditPage(reg, `?tenant_id=${id}`);
    expect(next_cursor).toBeNull();
    const row = { method: 'POST', tenant_id: id, status: 200, error: null, client_address: expect.stringMatching(/127\.0\.0\.1$/), suppressed: 0 };
    expect(entries).toEqual([
      { ...row, at: expect.any(String), actor: current, action: 'revoke_all', request_id: revokeRequestId },
      { ...row, at: expect.any(String), actor: next, action: 'disable', request_id: expect.stringMatching(/^[0-9a-f-]{36}$/) },
      { ...row, at: expect.any(String), actor: current, action: 'create', status: 201, request_id: 'audit-create' },
    ]);
    for (const e of entries) {
      const at = new Date(e.at).getTime();
      expect(new Date(e.at).toISOString()).toBe(e.at);
      expect(at).toBeGreaterThanOrEqual(before - 1000);
      expect(at).toBeLessThanOrEqual(Date.now() + 1000);
    }
  });

  it('records a refused call with what it tried: 404 tenant_not_found, 401 invalid_admin_token, 400 and 405', async () => {
    expect((await reg.admin('POST', `/admin/tenants/${UNKNOWN_ID}/disable`)).status).toBe(404);
    const refused = await fetch(`${reg.baseUrl}/admin/tenants/${UNKNOWN_ID}/jwt_secret/revoke_all`, { method: 'POST', headers: { authorization: 'Bearer not-the-admin-token-at-all-but-long-enough' } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe('Bearer realm="service-relay"');
    expect((await fetch(`${reg.baseUrl}/admin/tenants/${UNKNOWN_ID}`, { method: 'DELETE' })).status).toBe(401);
    expect((await reg.admin('PUT', `/admin/tenants/${UNKNOWN_ID}`)).status).toBe(405);
    const { entries } = await auditPage(reg, `?tenant_id=${UNKNOWN_ID}`);
    expect(entries.map((e) => [e.actor, e.method, e.action, e.status, e.error])).toEqual([
      [current, 'PUT', 'unknown', 405, 'method_not_allowed'],
      ['unauthenticated', 'DELETE', 'delete', 401, 'invalid_admin_token'],
      ['unauthenticated', 'POST', 'revoke_all', 401, 'invalid_admin_token'],
      [current, 'POST', 'disable', 404, 'tenant_not_found'],
    ]);
    expect((await reg.admin('POST', '/admin/tenants/nope/disable', { headers: { 'x-request-id': 'bad-id' } })).status).toBe(400);
    expect((await reg.admin('GET', '/admin/nowhere', { headers: { 'x-request-id': 'nowhere' } })).status).toBe(404);
    const recent = (await auditPage(reg, '?limit=3')).entries;
    expect(recent.map((e) => [e.request_id, e.action, e.tenant_id, e.status, e.error])).toEqual([
      ['nowhere', 'unknown', null, 404, 'not_found'],
      ['bad-id', 'disable', null, 400, 'invalid_tenant_id'],
      [expect.any(String), 'audit', null, 200, null],
    ]);
  });

  it('pages newest first with an opaque cursor, over all calls or one tenant', async () => {
    const id = (await create(reg)).tenant_id!;
    for (const action of ['disable', 'enable', 'jwt_secret/rotate', 'jwt_secret/expire_previous']) await reg.admin('POST', `/admin/tenants/${id}/${action}`);
    const collect = async (query: string) => {
      const seen: AuditEntryView[] = [];
      let cursor: string | null = null;
      do {
        const page: AuditPage = await auditPage(reg, `?limit=2${query}${cursor ? `&cursor=${cursor}` : ''}`);
        expect(page.entries.length).toBeLessThanOrEqual(2);
        seen.push(...page.entries);
        cursor = page.next_cursor;
      } while (cursor);
      return seen;
    };
    const ofTenant = await collect(`&tenant_id=${id}`);
    expect(ofTenant.map((e) => e.action)).toEqual(['expire_previous', 'rotate', 'enable', 'disable', 'create']);

    const snapshot = (await auditPage(reg, '?limit=100')).entries;
    expect(snapshot.length).toBeLessThan(100);
    // The first page also holds the snapshot's own row; later calls are above the cursor and do not shift the pages.
    const all = await collect('');
    expect(all[0]).toMatchObject({ action: 'audit', status: 200 });
    expect(all.slice(1)).toEqual(snapshot);
    for (let i = 1; i < all.length; i++) expect(all[i - 1]!.at >= all[i]!.at).toBe(true);
  });

  it('filters by action, outcome and time (the console audit page), and says what is wrong with a bad filter', async () => {
    const t = await create(reg);
    const id = t.tenant_id!;
    const since = new Date(Date.now() - 1000).toISOString();
    expect((await reg.admin('POST', `/admin/tenants/${id}/disable`)).status).toBe(200);
    expect((await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/rotate`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const q = `?tenant_id=${id}&since=${encodeURIComponent(since)}`;
    expect((await auditPage(reg, `${q}&action=disable&action=rotate`)).entries.map((e) => [e.action, e.status])).toEqual([['rotate', 401], ['disable', 200]]);
    expect((await auditPage(reg, `${q}&outcome=ok`)).entries.map((e) => e.action)).toEqual(['disable', 'create']);
    expect((await auditPage(reg, `${q}&outcome=refused`)).entries.map((e) => e.action)).toEqual(['rotate']);
    expect((await auditPage(reg, `${q}&outcome=failed`)).entries).toEqual([]);
    expect((await auditPage(reg, `?tenant_id=${id}&until=${encodeURIComponent(since)}`)).entries).toEqual([]);
    const problems: Array<[string, RegExp]> = [
      ['outcome=bad', /outcome is one of ok, refused, failed/],
      ['action=Disable', /action is an audit action name/],
      ['since=yesterday', /since is an RFC 3339 timestamp/],
      ['since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z', /since must be before until/],
      ['tenant=x', /unknown query parameter tenant/],
    ];
    for (const [query, problem] of problems) {
      const res = await reg.admin('GET', `/admin/audit?${query}`);
      expect(res.status, query).toBe(400);
      const body = (await res.json()) as { errors: string[]; problem: string };
      expect(body.errors).toEqual(['invalid_query']);
      expect(body.problem).toMatch(problem);
    }
  });

  it('refuses a bad query like the other admin lists, and a wrong method with 405', async () => {
    const cases: Array<[string, string]> = [
      ['limit=0', 'invalid_query'],
      ['limit=101', 'invalid_query'],
      ['limit=x', 'invalid_query'],
      ['cursor=%%%', 'invalid_query'],
      [`cursor=${Buffer.from(JSON.stringify(['audit', -1])).toString('base64url')}`, 'invalid_query'],
      [`cursor=${Buffer.from(JSON.stringify(['2024-01-01T00:00:00.000Z', UNKNOWN_ID])).toString('base64url')}`, 'invalid_query'],
      ['cursor=a&cursor=b', 'invalid_query'],
      ['tenant_id=nope', 'invalid_tenant_id'],
      [`tenant_id=${UNKNOWN_ID.toUpperCase()}`, 'invalid_tenant_id'],
      [`tenant_id=${UNKNOWN_ID}&tenant_id=${UNKNOWN_ID}`, 'invalid_query'],
    ];
    for (const [q, code] of cases) {
      const res = await reg.admin('GET', `/admin/audit?${q}`);
      expect(res.status, q).toBe(400);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(await res.text()).toBe(`{"errors":["${code}"]}`);
    }
    const post = await reg.admin('POST', '/admin/audit');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
    const anonymous = await fetch(`${reg.baseUrl}/admin/audit`);
    expect(anonymous.status).toBe(401);
    expect(await anonymous.text()).toBe('{"errors":["invalid_admin_token"]}');
  });

  it('never writes a secret or a token to an audit row or a log line', async () => {
    const t = await create(reg);
    const id = t.tenant_id!;
    const fetched = await fetch(`${reg.baseUrl}/api/host/tenants/${id}/jwt_secret/fetch`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${t.host_sync_client_id}:${t.host_sync_client_secret}`).toString('base64')}` },
    });
    const jwtSecret = ((await fetched.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    const revoked = (await (await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`)).json()) as Record<string, string>;
    const rotated = (await (await reg.admin('POST', `/admin/tenants/${id}/host_sync/rotate`, { headers: { authorization: `Bearer ${nextToken}` } })).json()) as Record<string, string>;
    const wrong = `${reg.adminToken.slice(0, -4)}abcd`;
    await reg.admin('POST', `/admin/tenants/${id}/disable`, { headers: { authorization: `Bearer ${wrong}` } });
    await reg.admin('GET', `/admin/audit?token=${wrong}`);
    const rows = JSON.stringify(await auditPage(reg, '?limit=100'));
    const secrets = [
      reg.adminToken,
      nextToken,
      wrong,
      reg.internalToken,
      ...reg.config.secretsKeys.map((k) => k.key.toString('base64')),
      jwtSecret,
      t.host_sync_client_secret,
      revoked.host_sync_client_secret,
      rotated.host_sync_client_secret,
    ];
    for (const secret of secrets) {
      expect(secret).toMatch(/.{32,}/);
      expect(rows).not.toContain(secret);
      expect(reg.logs()).not.toContain(secret);
    }
    expect(rows).toContain(id);
  });

  // Last: the stuck consumer's lease outlives the test and would hold up later changes.
  it('records 503 change_not_propagated, with the committed change', async () => {
    const id = (await create(reg)).tenant_id!;
    const stuck = await reg.consumer(1500);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    stuck.subscribe(async (e) => {
      if (e.tenant_id === id && e.kind === 'revoked_all') await released;
    });
    try {
      expect((await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`)).status).toBe(503);
      release();
      // Repeated once the consumer applied it: confirmed (and the consumer is current again before it goes).
      expect((await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`)).status).toBe(200);
    } finally {
      release();
      stuck.close();
    }
    const latest = (await auditPage(reg, `?tenant_id=${id}&limit=2`)).entries;
    expect(latest).toEqual([
      expect.objectContaining({ actor: current, action: 'revoke_all', tenant_id: id, status: 200, error: null }),
      expect.objectContaining({ actor: current, action: 'revoke_all', tenant_id: id, status: 503, error: 'change_not_propagated' }),
    ]);
  });
});

describe('admin audit log: failed authentications are bounded', () => {
  let reg: TestRegistry;
  beforeAll(async () => {
    reg = await startTestRegistry({ env: { AUDIT_UNAUTHENTICATED_PER_MINUTE: '3' }, logLevel: 'info' });
  });
  afterAll(async () => {
    await reg?.stop();
  });

  it('answers every refusal but writes at most the per-minute limit, counting the rest', async () => {
    const answers = await Promise.all(Array.from({ length: 25 }, () => fetch(`${reg.baseUrl}/admin/tenants`, { headers: { authorization: `Bearer ${'w'.repeat(40)}` } })));
    expect(answers.map((r) => r.status)).toEqual(Array(25).fill(401));
    const { entries } = await auditPage(reg, '?limit=100');
    expect(entries.filter((e) => e.actor === 'unauthenticated')).toHaveLength(3);
    const metrics = await (await fetch(`${reg.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/relay_registry_audit_writes_total\{[^}]*result="suppressed"[^}]*\} 22\b/);
    expect(reg.logs().match(/failed admin authentications over the audit limit/g)).toHaveLength(1);
  });
});
