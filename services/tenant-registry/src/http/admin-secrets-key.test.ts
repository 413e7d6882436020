import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runAdminCli } from '../cli/commands';
import { progressLine } from '../cli/secrets-key-commands';
import { loadConfig } from '../config';
import { createServer } from '../server';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

interface Created {
  tenant_id: string;
  host_sync_client_id: string;
  host_sync_client_secret: string;
}

const K0 = randomBytes(32).toString('base64');
const K1 = randomBytes(32).toString('base64');

// SECRETS_KEY as a keyring (#33 item 2) on one registry (the embedded
// default's case: one process): GET /admin/secrets-key, the CLI following the
// re-encryption to the end, the start refused without a key in use, and the
// old key removed.
describe('GET /admin/secrets-key and `npm run admin -- secrets-key` (#33)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'registry-keyring-'));
  const registries: TestRegistry[] = [];
  const tenants: Array<Created & { jwt: string }> = [];
  const start = async (env: Record<string, string>) => {
    const reg = await startTestRegistry({ dataDir, logLevel: 'info', env });
    registries.push(reg);
    return reg;
  };
  const fetchJwt = (reg: TestRegistry, t: Created) =>
    fetch(`${reg.baseUrl}/api/host/tenants/${t.tenant_id}/jwt_secret/fetch`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${t.host_sync_client_id}:${t.host_sync_client_secret}`).toString('base64')}` },
    });
  const cli = async (reg: TestRegistry, argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runAdminCli(argv, { registryUrl: reg.baseUrl, adminToken: reg.adminToken, secretsFile: '/nowhere/secrets.env' }, { out: (t) => out.push(t), err: (t) => err.push(t) });
    return { code, stdout: out.join('\n'), stderr: err };
  };
  /** Every tenant's host-sync fetch answers 200 with the same JWT secret as at creation. */
  const everyFetchServed = async (reg: TestRegistry) => {
    for (const t of tenants) {
      const res = await fetchJwt(reg, t);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { jwt_secret_primary: string }).jwt_secret_primary).toBe(t.jwt);
    }
  };

  beforeAll(async () => {
    const reg = await start({ SECRETS_KEY: K0 });
    for (let i = 0; i < 3; i++) {
      const t = (await (await reg.admin('POST', '/admin/tenants')).json()) as Created;
      const jwt = ((await (await fetchJwt(reg, t)).json()) as { jwt_secret_primary: string }).jwt_secret_primary;
      tenants.push({ ...t, jwt });
    }
  });
  afterAll(async () => {
    for (const r of registries) await r.stop().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('SECRETS_KEY alone: k0 seals every secret, done, nothing to remove; only GET, recorded in the audit log', async () => {
    const reg = registries[0]!;
    const res = await reg.admin('GET', '/admin/secrets-key');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ active_key_id: 'k0', state: 'done', secrets: { k0: 4 }, total: 4, configured_key_ids: ['k0'], removable_key_ids: [], waiting_on: [] });
    expect(body.registries).toEqual([expect.objectContaining({ key_ids: ['k0'], sealing_key_id: 'k0' })]);
    const post = await reg.admin('POST', '/admin/secrets-key');
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET');
    expect((await reg.admin('GET', '/admin/secrets-key', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const audit = (await (await reg.admin('GET', '/admin/audit?action=secrets_key')).json()) as { entries: Array<{ action: string; status: number }> };
    // The POST is recorded too, as `unknown` (no such route and method), as for every admin path.
    expect(audit.entries.map((e) => e.status).sort()).toEqual([200, 401]);
    const plain = await cli(reg, ['secrets-key']);
    expect(plain.code).toBe(0);
    expect(JSON.parse(plain.stdout)).toMatchObject({ state: 'done', active_key_id: 'k0' });
    for (const bad of [['--bogus'], ['--timeout', '5'], ['--wait', '--timeout', 'x'], ['--wait', '--timeout', '0']]) {
      const r = await cli(reg, ['secrets-key', ...bad]);
      expect(r.code, bad.join(' ')).toBe(2);
      expect(r.stderr.join('\n')).toMatch(/^error: secrets-key /);
    }
  });

  it('refuses to start, in one line naming the variable, without the key every secret is sealed under', async () => {
    await registries[0]!.stop();
    const config = loadConfig({
      REGISTRY_HTTP_PORT: '0',
      REGISTRY_GRPC_PORT: '0',
      REGISTRY_OPS_PORT: '0',
      DATA_DIR: dataDir,
      ADMIN_TOKEN: randomBytes(32).toString('base64url'),
      INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
      SECRETS_KEYS: `k1:${K1}`,
      LOG_LEVEL: 'silent',
    });
    const server = createServer(config);
    await expect(server.start()).rejects.toThrow(
      'configuration error: SECRETS_KEYS lacks key k0, which sealed 4 stored secrets: configure it again (an entry of SECRETS_KEYS, or SECRETS_KEY for k0) until GET /admin/secrets-key counts none under it (docs/OPERATIONS.md "Rotating SECRETS_KEY")',
    );
  });

  it('a new key in SECRETS_KEYS: the registry seals with it, re-encrypts everything, and the CLI follows to the end; fetches are served throughout', async () => {
    const reg = await start({ SECRETS_KEY: K0, SECRETS_KEYS: `k1:${K1}` });
    const followed = cli(reg, ['secrets-key', '--wait', '--timeout', '60']);
    await everyFetchServed(reg);
    const r = await followed;
    expect(r.code, r.stderr.join('\n')).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ active_key_id: 'k1', state: 'done', secrets: { k1: 4 }, total: 4, configured_key_ids: ['k1', 'k0'], removable_key_ids: ['k0'] });
    for (const line of r.stderr.slice(0, -1)) expect(line).toMatch(/^secrets-key: (k1 seals once every registry has it|re-encrypting under k[01]: \d+ of 4 secrets)/);
    expect(r.stderr.at(-1)).toBe('done: every stored secret is sealed under k1; no longer used: k0 (remove from SECRETS_KEYS / SECRETS_KEY and roll the registries and verifiers)');
    await everyFetchServed(reg);
    await reg.stop();
  });

  it('the CLI says where a rotation stands in one line: waiting for registries, re-encrypting with what is left, done', () => {
    const base = { active_key_id: 'k0', total: 1000, removable_key_ids: [], waiting_on: [], configured_key_ids: ['k1', 'k0'] };
    expect(progressLine({ ...base, state: 'activating', secrets: { k0: 1000 }, waiting_on: ['registry-b:1:abc'] })).toBe('secrets-key: k1 seals once every registry has it; waiting on registry-b:1:abc; k0 seals meanwhile');
    expect(progressLine({ ...base, state: 'activating', secrets: { k0: 1000 } })).toBe('secrets-key: k1 seals once every registry has it; waiting on the next check (within a second); k0 seals meanwhile');
    expect(progressLine({ ...base, active_key_id: 'k1', state: 'reencrypting', secrets: { k1: 812, k0: 188 } })).toBe('secrets-key: re-encrypting under k1: 812 of 1000 secrets (81%); left: k0: 188');
    expect(progressLine({ ...base, active_key_id: 'k1', state: 'done', secrets: { k1: 1000 } })).toBe('secrets-key: done under k1: 1000 of 1000 secrets (100%)');
  });

  it('the old key removed: SECRETS_KEYS=k1 alone starts and serves every tenant; no key or secret reached a log', async () => {
    const reg = await start({ SECRETS_KEY: '', SECRETS_KEYS: `k1:${K1}` });
    await everyFetchServed(reg);
    expect(JSON.parse((await cli(reg, ['secrets-key'])).stdout)).toMatchObject({ state: 'done', secrets: { k1: 4 }, configured_key_ids: ['k1'], removable_key_ids: [] });
    const logs = registries.map((x) => x.logs()).join('');
    expect(logs).toContain('secrets keyring: every registry has the newest key');
    for (const secret of [K0, K1, ...tenants.flatMap((t) => [t.jwt, t.host_sync_client_secret])]) expect(logs).not.toContain(secret);
  });
});
