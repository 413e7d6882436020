import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { tenantFile, type ChatConfig } from './config';

export interface TenantCredential {
  tenantId: string;
  clientId: string;
  clientSecret: string;
  /** Where it came from, for the start-up line. */
  source: 'environment' | 'file' | 'created';
}

/** The credential from the environment, else the one saved by an earlier run. */
export function savedTenant(config: ChatConfig): TenantCredential | undefined {
  if (config.tenant) return { ...config.tenant, source: 'environment' };
  const file = tenantFile(config);
  if (!existsSync(file)) return undefined;
  const saved = JSON.parse(readFileSync(file, 'utf8')) as { tenant_id: string; host_sync_client_id: string; host_sync_client_secret: string };
  return { tenantId: saved.tenant_id, clientId: saved.host_sync_client_id, clientSecret: saved.host_sync_client_secret, source: 'file' };
}

/**
 * First run: the demo tenant is created through the admin API (an operator's
 * job in production) and its host-sync credential saved next to `npm start`'s
 * data, readable by this user only.
 */
export async function createDemoTenant(config: ChatConfig): Promise<TenantCredential> {
  const token = config.adminToken ?? adminTokenFromDataDir(config.dataDir);
  if (!token) {
    throw new Error(`no ADMIN_TOKEN and none in ${join(config.dataDir, 'secrets.env')}: start the relay with \`npm start\` first, or set ADMIN_TOKEN, or TENANT_ID with its host-sync credential`);
  }
  const res = await fetch(`${config.registryUrl}/admin/tenants`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  const body = (await res.json().catch(() => ({}))) as { tenant_id?: string; host_sync_client_id?: string; host_sync_client_secret?: string; errors?: string[] };
  if (res.status !== 201 || !body.tenant_id || !body.host_sync_client_id || !body.host_sync_client_secret) {
    throw new Error(`creating the demo tenant at ${config.registryUrl} failed: ${res.status} ${JSON.stringify(body.errors ?? body)}`);
  }
  const file = tenantFile(config);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify({ tenant_id: body.tenant_id, host_sync_client_id: body.host_sync_client_id, host_sync_client_secret: body.host_sync_client_secret }, null, 2)}\n`, { mode: 0o600 });
  return { tenantId: body.tenant_id, clientId: body.host_sync_client_id, clientSecret: body.host_sync_client_secret, source: 'created' };
}

function adminTokenFromDataDir(dataDir: string): string | undefined {
  const file = join(dataDir, 'secrets.env');
  if (!existsSync(file)) return undefined;
  const line = readFileSync(file, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('ADMIN_TOKEN='));
  return line?.slice('ADMIN_TOKEN='.length).trim() || undefined;
}
