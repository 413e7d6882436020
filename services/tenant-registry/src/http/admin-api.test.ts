import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

const VIEW_KEYS = ['created_at', 'disabled', 'has_previous_host_sync', 'has_previous_secret', 'host_sync_client_id', 'labels', 'name', 'tenant_id', 'updated_at'];
const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';

let reg: TestRegistry;
beforeAll(async () => {
  reg = await startTestRegistry();
});
afterAll(async () => {
  await reg?.stop();
});

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

async function createTenant(): Promise<Record<string, unknown>> {
  const res = await reg.admin('POST', '/admin/tenants');
  expect(res.status).toBe(201);
  return json(res);
}

function eventsFor(tenantId: unknown) {
  return reg.events.filter((e) => e.tenant_id === tenantId).map(({ kind, version, revoked_key_versions }) => ({ kind, version, revoked_key_versions }));
}

describe('admin API', () => {
  it('creates a tenant: 201, the view plus the host-sync secret once, and a created event', async () => {
    const res = await reg.admin('POST', '/admin/tenants');
    expect(res.status).toBe(201);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = await json(res);
    expect(Object.keys(body).sort()).toEqual([...VIEW_KEYS, 'host_sync_client_secret'].sort());
    expect(body).toMatchObject({
      tenant_id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      host_sync_client_id: expect.stringMatching(/^hs_[0-9a-f]{32}$/),
      host_sync_client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      disabled: false,
      has_previous_secret: false,
      has_previous_host_sync: false,
    });
    expect(new Date(body.created_at as string).toISOString()).toBe(body.created_at);
    expect(eventsFor(body.tenant_id)).toEqual([{ kind: 'created', version: 1, revoked_key_versions: [] }]);

    const get = await reg.admin('GET', `/admin/tenants/${body.tenant_id as string}`);
    expect(get.status).toBe(200);
    const view = await json(get);
    expect(Object.keys(view).sort()).toEqual(VIEW_KEYS);
    expect(view).toEqual({ ...body, host_sync_client_secret: undefined });
  });

  it('accepts an empty or {} body on create (or a name and labels), refuses what is not JSON with 400 invalid_body and other JSON with 400 invalid_tenant_meta', async () => {
    for (const body of ['', '{}', ' { } ', '{"name":"x"}']) {
      expect((await reg.admin('POST', '/admin/tenants', { body, headers: { 'content-type': 'application/json' } })).status).toBe(201);
    }
    for (const body of ['{', 'hello']) {
      const res = await reg.admin('POST', '/admin/tenants', { body, headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(400);
      expect(await res.text()).toBe('{"errors":["invalid_body"]}');
    }
    for (const body of ['{"x":1}', '[]', 'null']) {
      const res = await reg.admin('POST', '/admin/tenants', { body, headers: { 'content-type': 'application/json' } });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { errors: string[] }).errors).toEqual(['invalid_tenant_meta']);
    }
    const big = await reg.admin('POST', '/admin/tenants', { body: `{"x":"${'a'.repeat(20_000)}"}`, headers: { 'content-type': 'application/json' } });
    expect(big.status).toBe(413);
    expect(await big.text()).toBe('{"errors":["payload_too_large"]}');
  });

  it('disables and enables; a repeated disable is propagated again', async () => {
    const t = await createTenant();
    const id = t.tenant_id as string;
    const disabled = await reg.admin('POST', `/admin/tenants/${id}/disable`);
    expect(disabled.status).toBe(200);
    expect(await json(disabled)).toMatchObject({ tenant_id: id, disabled: true });
    const again = await reg.admin('POST', `/admin/tenants/${id}/disable`);
    expect(await json(again)).toMatchObject({ disabled: true });
    const enabled = await reg.admin('POST', `/admin/tenants/${id}/enable`);
    expect(enabled.status).toBe(200);
    const view = await json(enabled);
    expect(Object.keys(view).sort()).toEqual(VIEW_KEYS);
    expect(view.disabled).toBe(false);
    expect(eventsFor(id)).toEqual([
      { kind: 'created', version: 1, revoked_key_versions: [] },
      { kind: 'disabled', version: 2, revoked_key_versions: [] },
      { kind: 'disabled', version: 3, revoked_key_versions: [] },
      { kind: 'enabled', version: 4, revoked_key_versions: [] },
    ]);
  });

  it('rotates, expires the previous and revokes all, with the revoked key versions', async () => {
    const id = (await createTenant()).tenant_id as string;
    const rotated = await json(await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/rotate`));
    expect(rotated).toMatchObject({ has_previous_secret: true });
    expect(rotated).not.toHaveProperty('host_sync_client_secret');
    await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/rotate`);
    const expired = await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/expire_previous`);
    expect(expired.status).toBe(200);
    expect(await json(expired)).toMatchObject({ has_previous_secret: false });
    const noop = await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/expire_previous`);
    expect(noop.status).toBe(200);
    await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/rotate`);
    const revoked = await reg.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`);
    expect(revoked.status).toBe(200);
    const body = await json(revoked);
    expect(Object.keys(body).sort()).toEqual([...VIEW_KEYS, 'host_sync_client_secret'].sort());
    expect(body).toMatchObject({ has_previous_secret: false, host_sync_client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(eventsFor(id)).toEqual([
      { kind: 'created', version: 1, revoked_key_versions: [] },
      { kind: 'rotated', version: 2, revoked_key_versions: [] },
      { kind: 'rotated', version: 3, revoked_key_versions: [1] },
      { kind: 'previous_expired', version: 4, revoked_key_versions: [2] },
      { kind: 'previous_expired', version: 5, revoked_key_versions: [] },
      { kind: 'rotated', version: 6, revoked_key_versions: [] },
      { kind: 'revoked_all', version: 7, revoked_key_versions: [4, 3] },
    ]);
  });

  it('rotates the host-sync secret with no tenant event', async () => {
    const created = await createTenant();
    const id = created.tenant_id as string;
    const res = await reg.admin('POST', `/admin/tenants/${id}/host_sync/rotate`);
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toMatchObject({ tenant_id: id, host_sync_client_id: created.host_sync_client_id, host_sync_client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    expect(body.host_sync_client_secret).not.toBe(created.host_sync_client_secret);
    expect(eventsFor(id)).toEqual([{ kind: 'created', version: 1, revoked_key_versions: [] }]);
  });

  it('rotates the host-sync secret keeping the previous (#33), expires it, and refuses a bad query', async () => {
    const id = (await createTenant()).tenant_id as string;
    const kept = await reg.admin('POST', `/admin/tenants/${id}/host_sync/rotate?keep_previous=true`);
    expect(kept.status).toBe(200);
    expect(await json(kept)).toMatchObject({ has_previous_host_sync: true, host_sync_client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
    const expired = await reg.admin('POST', `/admin/tenants/${id}/host_sync/expire_previous`);
    expect(expired.status).toBe(200);
    const view = await json(expired);
    expect(view).toMatchObject({ has_previous_host_sync: false });
    expect(view).not.toHaveProperty('host_sync_client_secret');
    for (const q of ['keep_previous=yes', 'keep=true']) {
      const bad = await reg.admin('POST', `/admin/tenants/${id}/host_sync/rotate?${q}`);
      expect(bad.status).toBe(400);
      expect(await json(bad)).toMatchObject({ errors: ['invalid_query'], problem: expect.any(String) });
    }
    expect((await reg.admin('POST', `/admin/tenants/${id}/host_sync/rotate?keep_previous=false`)).status).toBe(200);
    expect(eventsFor(id)).toEqual([{ kind: 'created', version: 1, revoked_key_versions: [] }]);
  });

  it('answers an admin call only after every consumer applied its event', async () => {
    const applied: string[] = [];
    const off = reg.feed.subscribe(async (e) => {
      await new Promise((r) => setImmediate(r));
      applied.push(e.kind);
    });
    try {
      const id = (await createTenant()).tenant_id as string;
      expect(applied).toEqual(['created']);
      await reg.admin('POST', `/admin/tenants/${id}/disable`);
      expect(applied).toEqual(['created', 'disabled']);
    } finally {
      off();
    }
  });

  it('serializes ten simultaneous rotations over HTTP', async () => {
    const id = (await createTenant()).tenant_id as string;
    const results = await Promise.all(Array.from({ length: 10 }, () => reg.admin('POST', `/admin/tenants/${id}/jwt_secret/rotate`)));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    const versions = eventsFor(id).map((e) => e.version);
    expect(versions.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it('pages the tenant list with an opaque cursor', async () => {
    for (let i = 0; i < 3; i++) await createTenant();
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await reg.admin('GET', `/admin/tenants?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { tenants: Array<Record<string, unknown>>; next_cursor: string | null };
      expect(Object.keys(body).sort()).toEqual(['next_cursor', 'tenants']);
      expect(body.tenants.length).toBeLessThanOrEqual(2);
      for (const t of body.tenants) expect(Object.keys(t).sort()).toEqual(VIEW_KEYS);
      seen.push(...body.tenants.map((t) => t.tenant_id as string));
      cursor = body.next_cursor;
      pages += 1;
    } while (cursor);
    const all = (await (await reg.admin('GET', '/admin/tenants?limit=100')).json()) as { tenants: Array<{ tenant_id: string }>; next_cursor: null };
    expect(all.next_cursor).toBeNull();
    expect(seen).toEqual(all.tenants.map((t) => t.tenant_id));
    expect(pages).toBe(Math.ceil(seen.length / 2));
  });

  it('refuses a bad limit or cursor with 400 invalid_query', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'limit=1.5', 'limit=-1', 'limit=1&limit=2', 'cursor=%%%', 'cursor=bm9wZQ', 'cursor=a&cursor=b']) {
      const res = await reg.admin('GET', `/admin/tenants?${q}`);
      expect(res.status, q).toBe(400);
      expect(await res.text()).toBe('{"errors":["invalid_query"]}');
    }
  });

  it('refuses a missing or wrong admin token with 401 invalid_admin_token', async () => {
    const cases: Array<Record<string, string>> = [
      {},
      { authorization: '' },
      { authorization: `Bearer ${reg.adminToken}x` },
      { authorization: `Basic ${reg.adminToken}` },
      { authorization: reg.adminToken },
    ];
    for (const headers of cases) {
      for (const [method, path] of [['POST', '/admin/tenants'], ['GET', '/admin/tenants'], ['GET', `/admin/tenants/${UNKNOWN_ID}`], ['POST', '/admin/nope']]) {
        const res = await fetch(`${reg.baseUrl}${path}`, { method, headers });
        expect(res.status).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('Bearer realm="service-relay"');
        expect(await res.text()).toBe('{"errors":["invalid_admin_token"]}');
      }
    }
  });

  it('answers 404 tenant_not_found for an unknown tenant on every call', async () => {
    const calls = [['GET', ''], ['POST', '/disable'], ['POST', '/enable'], ['POST', '/jwt_secret/rotate'], ['POST', '/jwt_secret/expire_previous'], ['POST', '/jwt_secret/revoke_all'], ['POST', '/host_sync/rotate']];
    for (const [method, suffix] of calls) {
      const res = await reg.admin(method!, `/admin/tenants/${UNKNOWN_ID}${suffix!}`);
      expect(res.status).toBe(404);
      expect(await res.text()).toBe('{"errors":["tenant_not_found"]}');
    }
  });

  it('answers 400 invalid_tenant_id for malformed ids, never a 500', async () => {
    const ids = ['nope', UNKNOWN_ID.toUpperCase(), `${UNKNOWN_ID}0`, '%E0%A4%A', '%00', "1'%20OR%20'1'='1", 'a'.repeat(5000)];
    for (const id of ids) {
      for (const [method, suffix] of [['GET', ''], ['POST', '/jwt_secret/rotate']]) {
        const res = await reg.admin(method!, `/admin/tenants/${id}${suffix!}`);
        expect(res.status, id).toBe(400);
        expect(await res.text()).toBe('{"errors":["invalid_tenant_id"]}');
      }
    }
  });

  it('answers 405 with Allow for a wrong method and 404 not_found for an unknown path', async () => {
    const wrong = await reg.admin('PUT', `/admin/tenants/${UNKNOWN_ID}`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, PATCH, DELETE');
    expect(await wrong.text()).toBe('{"errors":["method_not_allowed"]}');
    expect((await reg.admin('GET', `/admin/tenants/${UNKNOWN_ID}/disable`)).headers.get('allow')).toBe('POST');
    for (const path of ['/admin/tenants/x/y/z', '/admin', '/nope', '/api/host/tenants']) {
      const res = await reg.admin('GET', path);
      expect(res.status, path).toBe(404);
      expect(await res.text()).toBe('{"errors":["not_found"]}');
    }
  });

  it('never writes a secret or the admin token to the log', async () => {
    const created = await createTenant();
    const revoked = await json(await reg.admin('POST', `/admin/tenants/${created.tenant_id as string}/jwt_secret/revoke_all`));
    const rotated = await json(await reg.admin('POST', `/admin/tenants/${created.tenant_id as string}/host_sync/rotate`));
    await reg.admin('GET', '/admin/tenants', { headers: { authorization: 'Bearer wrong-token-that-should-not-be-logged' } });
    const logs = reg.logs();
    expect(logs).toContain(created.tenant_id as string);
    for (const secret of [reg.adminToken, created.host_sync_client_secret, revoked.host_sync_client_secret, rotated.host_sync_client_secret, 'wrong-token-that-should-not-be-logged']) {
      expect(logs).not.toContain(secret as string);
    }
  });
});

describe('admin API: an answer is the truth about propagation', () => {
  let r: TestRegistry;
  beforeAll(async () => {
    r = await startTestRegistry({ env: { PROPAGATION_TIMEOUT_MS: '600' }, logLevel: 'warn' });
  });
  afterAll(async () => {
    await r?.stop();
  });

  it('does not wait for a consumer that went silent: past its lease it trusts no cache', async () => {
    const id = ((await (await r.admin('POST', '/admin/tenants')).json()) as Record<string, unknown>).tenant_id as string;
    const gone = await r.consumer(300);
    gone.close();
    const res = await r.admin('POST', `/admin/tenants/${id}/disable`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ tenant_id: id, disabled: true });
  });

  it('answers 503 change_not_propagated with the committed view while a consumer holding its lease has not applied the change', async () => {
    const created = (await (await r.admin('POST', '/admin/tenants')).json()) as Record<string, unknown>;
    const id = created.tenant_id as string;
    const stuck = await r.consumer(1500);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    stuck.subscribe(async (e) => {
      if (e.tenant_id === id && e.kind === 'revoked_all') await released;
    });
    try {
      const res = await r.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`);
      expect(res.status).toBe(503);
      expect(res.headers.get('cache-control')).toBe('no-store');
      const body = (await res.json()) as { errors: string[]; tenant: Record<string, unknown>; pending_consumers: Array<{ consumer_id: string; kind: string }> };
      expect(body.errors).toEqual(['change_not_propagated']);
      // The change is committed: the view shows it, and the new host-sync secret is not lost.
      expect(body.tenant).toMatchObject({ tenant_id: id, has_previous_secret: false, host_sync_client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
      expect(body.pending_consumers).toEqual([expect.objectContaining({ consumer_id: stuck.consumerId, kind: 'test-consumer' })]);
      const view = (await (await r.admin('GET', `/admin/tenants/${id}`)).json()) as Record<string, unknown>;
      expect(view.updated_at).toBe(body.tenant.updated_at);
      release();
      // Once the consumer applied it, repeating the call is confirmed.
      expect((await r.admin('POST', `/admin/tenants/${id}/jwt_secret/revoke_all`)).status).toBe(200);
    } finally {
      release();
      stuck.close();
    }
  });

  it('counts the answer in /metrics', async () => {
    const text = await (await fetch(`${r.opsUrl}/metrics`)).text();
    expect(text).toMatch(/relay_registry_propagations_total\{[^}]*result="not_propagated"[^}]*\} [1-9]/);
    expect(text).toMatch(/relay_registry_propagations_total\{[^}]*result="confirmed"[^}]*\} [1-9]/);
    expect(text).toMatch(/relay_registry_feed_requests_total\{[^}]*result="ok"[^}]*\} [1-9]/);
  });
});
