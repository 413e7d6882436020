import * as grpc from '@grpc/grpc-js';
import { clientConstructor, internalMetadata, REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE } from '@service-relay/grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

interface KeysResponse {
  found: boolean;
  disabled: boolean;
  version: number;
  primary: { secret: string; key_version: number } | null;
  previous: { secret: string; key_version: number } | null;
}

let reg: TestRegistry;
type Callback<T> = (err: grpc.ServiceError | null, res: T) => void;
interface KeysClient extends grpc.Client {
  GetTenantKeys(req: { tenant_id: string }, md: grpc.Metadata, cb: Callback<KeysResponse>): void;
}
interface HealthClient extends grpc.Client {
  Check(req: { service: string }, cb: Callback<unknown>): void;
}

let client: KeysClient;
let health: HealthClient;

beforeAll(async () => {
  reg = await startTestRegistry();
  const address = `127.0.0.1:${reg.server.grpcPort}`;
  const Keys = clientConstructor(REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE);
  client = new Keys(address, grpc.credentials.createInsecure()) as unknown as KeysClient;
  const Health = clientConstructor('grpc/health/v1/health.proto', 'grpc.health.v1.Health');
  health = new Health(address, grpc.credentials.createInsecure()) as unknown as HealthClient;
});
afterAll(async () => {
  client?.close();
  health?.close();
  await reg?.stop();
});

function getKeys(tenantId: string, metadata: grpc.Metadata): Promise<KeysResponse> {
  return new Promise((resolve, reject) => {
    client.GetTenantKeys({ tenant_id: tenantId }, metadata, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

async function createTenant() {
  return (await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string; host_sync_client_id: string; host_sync_client_secret: string };
}

async function fetchPrimary(t: { tenant_id: string; host_sync_client_id: string; host_sync_client_secret: string }): Promise<string> {
  const res = await fetch(`${reg.baseUrl}/api/host/tenants/${t.tenant_id}/jwt_secret/fetch`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${t.host_sync_client_id}:${t.host_sync_client_secret}`).toString('base64')}` },
  });
  return ((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary;
}

describe('KeyService.GetTenantKeys', () => {
  it('refuses a call without or with a wrong internal token (UNAUTHENTICATED)', async () => {
    const t = await createTenant();
    for (const md of [new grpc.Metadata(), internalMetadata(`${reg.internalToken}x`), internalMetadata(reg.adminToken)]) {
      await expect(getKeys(t.tenant_id, md)).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    }
  });

  it('hands out the primary (as fetched by the host) and the previous with their versions', async () => {
    const t = await createTenant();
    const first = await fetchPrimary(t);
    expect(await getKeys(t.tenant_id, internalMetadata(reg.internalToken))).toEqual({
      found: true,
      disabled: false,
      version: 1,
      primary: { secret: first, key_version: 1 },
      previous: null,
      as_of_seq: expect.any(Number),
      user_revocations: [],
    });
    await reg.admin('POST', `/admin/tenants/${t.tenant_id}/jwt_secret/rotate`);
    const second = await fetchPrimary(t);
    expect(await getKeys(t.tenant_id, internalMetadata(reg.internalToken))).toEqual({
      found: true,
      disabled: false,
      version: 2,
      primary: { secret: second, key_version: 2 },
      previous: { secret: first, key_version: 1 },
      as_of_seq: expect.any(Number),
      user_revocations: [],
    });
  });

  it('reports a disabled tenant without any secret, and unknown or malformed ids as not found', async () => {
    const t = await createTenant();
    await reg.admin('POST', `/admin/tenants/${t.tenant_id}/disable`);
    expect(await getKeys(t.tenant_id, internalMetadata(reg.internalToken))).toEqual({ found: true, disabled: true, version: 2, primary: null, previous: null, as_of_seq: expect.any(Number), user_revocations: [] });
    for (const id of ['6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50', 'nope', '']) {
      expect(await getKeys(id, internalMetadata(reg.internalToken))).toMatchObject({ found: false, primary: null });
    }
  });

  it('reports a deleted tenant as not found, at its tombstone version (not older than the deleted change), twice in a row', async () => {
    const t = await createTenant();
    const res = await reg.admin('DELETE', `/admin/tenants/${t.tenant_id}`);
    expect(res.status).toBe(200);
    for (let i = 0; i < 2; i++) {
      expect(await getKeys(t.tenant_id, internalMetadata(reg.internalToken))).toMatchObject({ found: false, disabled: false, version: 2, primary: null, previous: null, as_of_seq: expect.any(Number) });
    }
  });

  it('serves grpc.health.v1', async () => {
    const res = await new Promise((resolve, reject) =>
      health.Check({ service: REGISTRY_KEYS_SERVICE }, (err, r) => (err ? reject(err) : resolve(r))),
    );
    expect(res).toEqual({ status: 'SERVING' });
  });

  it('never logs the internal token or a handed-out secret', async () => {
    const t = await createTenant();
    const keys = await getKeys(t.tenant_id, internalMetadata(reg.internalToken));
    const logs = reg.logs();
    expect(logs).not.toContain(reg.internalToken);
    expect(logs).not.toContain(keys.primary!.secret);
  });
});

describe('ops endpoints', () => {
  it('serves /healthz, /readyz (database) and /metrics with the registry counters on its ops port', async () => {
    expect(await (await fetch(`${reg.opsUrl}/healthz`)).json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${reg.opsUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { database: true, secrets_keyring: true } });
    const metrics = await (await fetch(`${reg.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/relay_registry_admin_requests_total\{route="create",status="201",service="tenant-registry"\} \d+/);
    expect(metrics).toMatch(/relay_registry_host_sync_fetches_total\{result="ok",service="tenant-registry"\} \d+/);
    expect(metrics).toMatch(/relay_registry_key_requests_total\{result="unauthenticated",service="tenant-registry"\} \d+/);
    expect(metrics).toMatch(/relay_registry_key_requests_total\{result="found",service="tenant-registry"\} \d+/);
  });
  it('keeps /healthz on its admin port (the gateway checks it there) and answers /readyz and /metrics there 404; the ops port serves nothing else', async () => {
    expect(await (await fetch(`${reg.baseUrl}/healthz`)).json()).toEqual({ status: 'ok' });
    for (const path of ['/readyz', '/metrics']) {
      const res = await fetch(`${reg.baseUrl}${path}`);
      expect(res.status, path).toBe(404);
      expect(await res.json()).toEqual({ errors: ['not_found'] });
    }
    for (const path of ['/admin/tenants', '/console/', '/api/host/tenants/x/jwt_secret/fetch']) {
      expect((await fetch(`${reg.opsUrl}${path}`, { headers: { authorization: `Bearer ${reg.adminToken}` } })).status, path).toBe(404);
    }
  });
});
