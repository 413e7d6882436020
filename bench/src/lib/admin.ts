import type { TenantKey } from './tokens';

export async function adminCall(registryHttp: string, adminToken: string, path: string, method = 'POST'): Promise<Record<string, unknown>> {
  const res = await fetch(`${registryHttp}${path}`, { method, headers: { authorization: `Bearer ${adminToken}` } });
  const body = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

/** A new tenant through a registry's admin API, its secret fetched through a gateway as a host would. */
export async function createTenantThrough(registryHttp: string, gatewayUrl: string, adminToken: string): Promise<TenantKey> {
  const tenant = await adminCall(registryHttp, adminToken, '/admin/tenants');
  const tenantId = String(tenant.tenant_id);
  const basic = Buffer.from(`${String(tenant.host_sync_client_id)}:${String(tenant.host_sync_client_secret)}`).toString('base64');
  const fetched = await fetch(`${gatewayUrl}/api/host/tenants/${tenantId}/jwt_secret/fetch`, { method: 'POST', headers: { authorization: `Basic ${basic}` } });
  const body = (await fetched.json()) as { jwt_secret_primary?: string };
  if (!fetched.ok || !body.jwt_secret_primary) throw new Error(`host-sync fetch through the gateway failed: ${fetched.status}`);
  return { tenantId, secret: body.jwt_secret_primary };
}
