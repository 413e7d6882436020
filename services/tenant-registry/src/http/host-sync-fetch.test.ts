import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

interface Created {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

const FAILURE_BODY = '{"errors":["invalid_host_sync_credentials"]}';
const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';

let reg: TestRegistry;
let tenant: Created;
let other: Created;

beforeAll(async () => {
  reg = await startTestRegistry();
  tenant = await create();
  other = await create();
});
afterAll(async () => {
  await reg?.stop();
});

async function create(): Promise<Created> {
  return (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
}

function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

function fetchSecret(tenantId: string, authorization?: string, method = 'POST'): Promise<Response> {
  return fetch(`${reg.baseUrl}/api/host/tenants/${tenantId}/jwt_secret/fetch`, { method, headers: authorization === undefined ? {} : { authorization } });
}

/** Status, body and every header that is not per-connection, exactly. */
async function snapshot(res: Response) {
  const headers = [...res.headers.entries()].filter(([k]) => !['date', 'connection', 'keep-alive', 'x-request-id'].includes(k));
  return { status: res.status, headers, body: await res.text() };
}

const EXPECTED_FAILURE = {
  status: 401,
  headers: [
    ['cache-control', 'no-store, private'],
    ['content-length', String(FAILURE_BODY.length)],
    ['content-type', 'application/json; charset=utf-8'],
    ['pragma', 'no-cache'],
    ['www-authenticate', 'Basic realm="service-relay"'],
  ],
  body: FAILURE_BODY,
};

describe('host-sync fetch', () => {
  it('answers 200 with the primary secret and no-cache headers', async () => {
    const res = await fetchSecret(tenant.tenant_id, basic(tenant.host_sync_client_id, tenant.host_sync_client_secret));
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store, private');
    expect(res.headers.get('pragma')).toBe('no-cache');
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body)).toEqual(['kid', 'algorithm', 'issuer', 'audience', 'jwt_secret_primary']);
    expect(body).toMatchObject({ kid: tenant.tenant_id, algorithm: 'HS256', issuer: 'service-relay', audience: 'service-relay' });
    expect(body.jwt_secret_primary).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('returns the new primary after a rotation', async () => {
    const auth = basic(other.host_sync_client_id, other.host_sync_client_secret);
    const before = ((await (await fetchSecret(other.tenant_id, auth)).json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    await reg.admin('POST', `/admin/tenants/${other.tenant_id}/jwt_secret/rotate`);
    const after = ((await (await fetchSecret(other.tenant_id, auth)).json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    expect(after).not.toBe(before);
  });

  it('names the primary key version in an ETag, never the secret: it changes with rotate and revoke_all only', async () => {
    const t = await create();
    let auth = basic(t.host_sync_client_id, t.host_sync_client_secret);
    const etag = async () => {
      const res = await fetchSecret(t.tenant_id, auth);
      const { jwt_secret_primary } = (await res.json()) as { jwt_secret_primary: string };
      const tag = res.headers.get('etag');
      expect(tag).not.toContain(jwt_secret_primary);
      return tag;
    };
    expect(await etag()).toBe('"k1"');
    await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/rotate`);
    expect(await etag()).toBe('"k2"');
    await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/expire_previous`);
    expect(await etag()).toBe('"k2"');
    auth = basic(t.host_sync_client_id, ((await (await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/revoke_all`)).json()) as Created).host_sync_client_secret);
    expect(await etag()).toBe('"k3"');
  });

  it('gives every failure kind the byte-identical 401', async () => {
    const good = basic(tenant.host_sync_client_id, tenant.host_sync_client_secret);
    const long = 'x'.repeat(4000);
    const cases: Array<[string, string, string | undefined]> = [
      ['unknown tenant', UNKNOWN_ID, good],
      ['malformed tenant id', 'not-a-uuid', good],
      ['uppercase tenant id', tenant.tenant_id.toUpperCase(), good],
      ['percent-encoded junk id', '%E0%A4%A', good],
      ['oversize tenant id', 'a'.repeat(3000), good],
      ['wrong client id', tenant.tenant_id, basic(other.host_sync_client_id, tenant.host_sync_client_secret)],
      ['wrong secret', tenant.tenant_id, basic(tenant.host_sync_client_id, other.host_sync_client_secret)],
      ["another tenant's credential", tenant.tenant_id, basic(other.host_sync_client_id, other.host_sync_client_secret)],
      ['credential for the right tenant sent to another', other.tenant_id, good],
      ['missing header', tenant.tenant_id, undefined],
      ['empty header', tenant.tenant_id, ''],
      ['no colon', tenant.tenant_id, `Basic ${Buffer.from(tenant.host_sync_client_id + tenant.host_sync_client_secret).toString('base64')}`],
      ['not base64', tenant.tenant_id, 'Basic !!!notbase64!!!'],
      ['scheme only', tenant.tenant_id, 'Basic'],
      ['bearer scheme', tenant.tenant_id, `Bearer ${tenant.host_sync_client_secret}`],
      ['raw credential without scheme', tenant.tenant_id, Buffer.from(`${tenant.host_sync_client_id}:${tenant.host_sync_client_secret}`).toString('base64')],
      ['oversize secret', tenant.tenant_id, basic(tenant.host_sync_client_id, tenant.host_sync_client_secret + long)],
      ['oversize client id', tenant.tenant_id, basic(long, tenant.host_sync_client_secret)],
      ['empty secret', tenant.tenant_id, basic(tenant.host_sync_client_id, '')],
    ];
    for (const [name, id, auth] of cases) {
      expect(await snapshot(await fetchSecret(id, auth)), name).toEqual(EXPECTED_FAILURE);
    }
  });

  it('rejects a disabled tenant with the same 401, and serves it again once enabled', async () => {
    const t = await create();
    const auth = basic(t.host_sync_client_id, t.host_sync_client_secret);
    await reg.admin('POST', `/admin/tenants/${t.tenant_id}/disable`);
    expect(await snapshot(await fetchSecret(t.tenant_id, auth))).toEqual(EXPECTED_FAILURE);
    await reg.admin('POST', `/admin/tenants/${t.tenant_id}/enable`);
    expect((await fetchSecret(t.tenant_id, auth)).status).toBe(200);
  });

  it('kills the old host-sync secret on host_sync rotate and on revoke_all', async () => {
    const t = await create();
    const rotated = (await (await reg.admin('POST', `/admin/tenants/${t.tenant_id}/host_sync/rotate`)).json()) as Created;
    expect(await snapshot(await fetchSecret(t.tenant_id, basic(t.host_sync_client_id, t.host_sync_client_secret)))).toEqual(EXPECTED_FAILURE);
    expect((await fetchSecret(t.tenant_id, basic(t.host_sync_client_id, rotated.host_sync_client_secret))).status).toBe(200);
    const revoked = (await (await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/revoke_all`)).json()) as Created;
    expect(await snapshot(await fetchSecret(t.tenant_id, basic(t.host_sync_client_id, rotated.host_sync_client_secret)))).toEqual(EXPECTED_FAILURE);
    expect((await fetchSecret(t.tenant_id, basic(t.host_sync_client_id, revoked.host_sync_client_secret))).status).toBe(200);
  });

  it('accepts only POST on the fetch path', async () => {
    const res = await fetchSecret(tenant.tenant_id, basic(tenant.host_sync_client_id, tenant.host_sync_client_secret), 'GET');
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
  });

  it('keeps tenants and credentials across a restart', async () => {
    const auth = basic(tenant.host_sync_client_id, tenant.host_sync_client_secret);
    const before = await (await fetchSecret(tenant.tenant_id, auth)).text();
    await reg.restart();
    const res = await fetchSecret(tenant.tenant_id, auth);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(before);
  });

  it('never writes a credential or secret to the log', async () => {
    const auth = basic(tenant.host_sync_client_id, tenant.host_sync_client_secret);
    const primary = ((await (await fetchSecret(tenant.tenant_id, auth)).json()) as { jwt_secret_primary: string }).jwt_secret_primary;
    await fetchSecret(tenant.tenant_id, basic(tenant.host_sync_client_id, 'guessed-secret-value'));
    const logs = reg.logs();
    expect(logs).toContain('/jwt_secret/fetch');
    for (const s of [tenant.host_sync_client_secret, primary, auth.slice(6), 'guessed-secret-value']) expect(logs).not.toContain(s);
  });
});
