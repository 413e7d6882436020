import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';

interface Created {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

// DELETE /admin/tenants/{id} (#30 item 4) at the admin API, on the test registry (PGlite, one feed consumer).
describe('admin API: deleting a tenant', () => {
  let reg: TestRegistry;

  beforeAll(async () => {
    reg = await startTestRegistry({ logLevel: 'warn' });
  });
  afterAll(async () => {
    await reg?.stop();
  });

  const create = async (): Promise<Created> => (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
  const hostFetch = (t: Created) =>
    fetch(`${reg.baseUrl}/api/host/tenants/${t.tenant_id}/jwt_secret/fetch`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${t.host_sync_client_id}:${t.host_sync_client_secret}`).toString('base64')}` },
    });

  it('answers 200 once the feed consumer applied the deleted change, and the same shape (first deleted_at) on a repeat', async () => {
    const t = await create();
    expect((await hostFetch(t)).status).toBe(200);
    const res = await reg.admin('DELETE', `/admin/tenants/${t.tenant_id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toContain('no-store');
    const view = (await res.json()) as Record<string, unknown>;
    expect(view).toEqual({ tenant_id: t.tenant_id, deleted: true, deleted_at: expect.any(String), usage_kept: false, purged: { tenant_channel_rules: 0, user_revocations: 0, tenant_limits: 0, tenant_callbacks: 0, tenant_usage: 0, tenant_usage_peaks: 0, tenant_usage_refusals: 0, webhook_attempts: 0, webhook_deliveries: 0, webhook_endpoints: 0 } });
    // In force before the answer: the consumer had applied it.
    expect(reg.events.filter((e) => e.tenant_id === t.tenant_id).map((e) => e.kind)).toEqual(['created', 'deleted']);

    const again = await reg.admin('DELETE', `/admin/tenants/${t.tenant_id}?keep_usage=true`);
    expect(again.status).toBe(200);
    // The usage tables are kept (not named in `purged`); the rest purged again (nothing left).
    expect(await again.json()).toEqual({ ...view, usage_kept: true, purged: { tenant_channel_rules: 0, user_revocations: 0, tenant_limits: 0, tenant_callbacks: 0, webhook_attempts: 0, webhook_deliveries: 0, webhook_endpoints: 0 } });
    expect(reg.events.filter((e) => e.tenant_id === t.tenant_id).map((e) => e.kind)).toEqual(['created', 'deleted', 'deleted']);

    // Its host-sync credential is refused with the fetch's usual 401.
    const fetched = await hostFetch(t);
    expect(fetched.status).toBe(401);
    expect(await fetched.text()).toBe('{"errors":["invalid_host_sync_credentials"]}');
    const audit = (await (await reg.admin('GET', `/admin/audit?tenant_id=${t.tenant_id}`)).json()) as { entries: Array<{ action: string; status: number }> };
    expect(audit.entries.map((e) => [e.action, e.status])).toEqual([
      ['delete', 200],
      ['delete', 200],
      ['create', 201],
    ]);
  });

  it('answers every other call on a deleted tenant 404 tenant_not_found, and leaves it out of the list', async () => {
    const t = await create();
    await reg.admin('DELETE', `/admin/tenants/${t.tenant_id}`);
    for (const [method, path] of [
      ['GET', ''],
      ['POST', '/disable'],
      ['POST', '/jwt_secret/revoke_all'],
      ['GET', '/channel_rules'],
      ['DELETE', '/channel_rules'],
    ] as const) {
      const res = await reg.admin(method, `/admin/tenants/${t.tenant_id}${path}`);
      expect([method, path, res.status, await res.text()]).toEqual([method, path, 404, '{"errors":["tenant_not_found"]}']);
    }
    const list = (await (await reg.admin('GET', '/admin/tenants?limit=100')).json()) as { tenants: Array<{ tenant_id: string }> };
    expect(list.tenants.map((x) => x.tenant_id)).not.toContain(t.tenant_id);
  });

  it('refuses a bad request before deleting anything: unknown 404, malformed id, keep_usage, unknown parameter or a body 400', async () => {
    expect(await (await reg.admin('DELETE', `/admin/tenants/${UNKNOWN_ID}`)).text()).toBe('{"errors":["tenant_not_found"]}');
    const t = await create();
    const cases: Array<[string, RequestInit & { headers?: Record<string, string>; body?: string }, number, string]> = [
      ['/admin/tenants/not-a-uuid', {}, 400, 'invalid_tenant_id'],
      [`/admin/tenants/${t.tenant_id}?keep_usage=yes`, {}, 400, 'invalid_query'],
      [`/admin/tenants/${t.tenant_id}?keep_usage=true&force=1`, {}, 400, 'invalid_query'],
      [`/admin/tenants/${t.tenant_id}`, { headers: { 'content-type': 'application/json' }, body: '{"really":true}' }, 400, 'invalid_body'],
    ];
    for (const [path, init, status, code] of cases) {
      const res = await reg.admin('DELETE', path, init as { headers?: Record<string, string>; body?: string });
      expect([path, res.status, ((await res.json()) as { errors: string[] }).errors]).toEqual([path, status, [code]]);
    }
    expect((await reg.admin('GET', `/admin/tenants/${t.tenant_id}`)).status).toBe(200);
    // An empty body or {} is fine, like every other admin action.
    expect((await reg.admin('DELETE', `/admin/tenants/${t.tenant_id}`, { headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(200);
  });
});
