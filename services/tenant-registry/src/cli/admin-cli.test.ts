import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';
import { COMMANDS, runAdminCli } from './commands';

const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const CLI = fileURLToPath(new URL('./admin-cli.ts', import.meta.url));
const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';

let reg: TestRegistry;
let emptyDir: string;

beforeAll(async () => {
  reg = await startTestRegistry({ logLevel: 'warn' });
  emptyDir = mkdtempSync(join(tmpdir(), 'registry-cli-'));
});
afterAll(async () => {
  await reg?.stop();
  rmSync(emptyDir, { recursive: true, force: true });
});

/** The real entry point, as `npm run admin` starts it. */
function spawnCli(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', CLI, ...args],
      { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '', DATA_DIR: emptyDir, ...env }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The same command runner in-process, to cover every command cheaply. */
async function run(argv: string[], opts: { adminToken?: string | undefined } = { adminToken: reg.adminToken }) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runAdminCli(argv, { registryUrl: reg.baseUrl, adminToken: opts.adminToken, secretsFile: '/nowhere/secrets.env' }, { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

describe('admin CLI process', () => {
  it('creates a tenant and prints the JSON answer', async () => {
    const res = await spawnCli(['create-tenant'], { REGISTRY_URL: reg.baseUrl, ADMIN_TOKEN: reg.adminToken });
    expect(res.code).toBe(0);
    expect(res.stderr).toBe('');
    expect(JSON.parse(res.stdout)).toMatchObject({ tenant_id: expect.any(String), host_sync_client_secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
  });

  it('reads ADMIN_TOKEN from DATA_DIR/secrets.env when the environment has none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'registry-cli-secrets-'));
    try {
      writeFileSync(join(dir, 'secrets.env'), `ADMIN_TOKEN=${reg.adminToken}\nINTERNAL_TOKEN=x\n`, { mode: 0o600 });
      const res = await spawnCli(['list-tenants', '--limit', '1'], { REGISTRY_URL: reg.baseUrl, DATA_DIR: dir });
      expect(res.code).toBe(0);
      expect(JSON.parse(res.stdout)).toMatchObject({ tenants: [expect.objectContaining({ tenant_id: expect.any(String) })] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits non-zero with one clear line for a wrong token and for an unreachable registry', async () => {
    const [wrong, down] = await Promise.all([
      spawnCli(['get-tenant', UNKNOWN_ID], { REGISTRY_URL: reg.baseUrl, ADMIN_TOKEN: 'x'.repeat(40) }),
      spawnCli(['list-tenants'], { REGISTRY_URL: 'http://127.0.0.1:9', ADMIN_TOKEN: reg.adminToken }),
    ]);
    expect(wrong).toEqual({ code: 1, stdout: '', stderr: 'error: the registry refused the admin token (401 invalid_admin_token); check ADMIN_TOKEN\n' });
    expect(down.code).toBe(1);
    expect(down.stdout).toBe('');
    expect(down.stderr).toMatch(/^error: cannot reach the tenant registry at http:\/\/127\.0\.0\.1:9 \(.+\)\n$/);
  });
});

describe('admin CLI commands', () => {
  it('runs every tenant command and prints the view', async () => {
    const created = JSON.parse((await run(['create-tenant'])).stdout) as { tenant_id: string; host_sync_client_secret: string };
    const id = created.tenant_id;
    expect(JSON.parse((await run(['get-tenant', id])).stdout)).toMatchObject({ tenant_id: id, disabled: false });
    expect(JSON.parse((await run(['disable', id])).stdout)).toMatchObject({ tenant_id: id, disabled: true });
    expect(JSON.parse((await run(['enable', id])).stdout)).toMatchObject({ tenant_id: id, disabled: false });
    expect(JSON.parse((await run(['rotate-secret', id])).stdout)).toMatchObject({ has_previous_secret: true });
    expect(JSON.parse((await run(['expire-previous', id])).stdout)).toMatchObject({ has_previous_secret: false });
    const hostSync = JSON.parse((await run(['rotate-host-sync', id])).stdout) as { host_sync_client_secret: string };
    expect(hostSync.host_sync_client_secret).not.toBe(created.host_sync_client_secret);
    const revoked = await run(['revoke-all', id]);
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ tenant_id: id, host_sync_client_secret: expect.any(String) });
    await run(['create-tenant']);
    const page = JSON.parse((await run(['list-tenants', '--limit', '1'])).stdout) as { tenants: unknown[]; next_cursor: string };
    expect(page.tenants).toHaveLength(1);
    const next = JSON.parse((await run(['list-tenants', '--limit', '1', '--cursor', page.next_cursor])).stdout) as { tenants: unknown[] };
    expect(next.tenants).toHaveLength(1);
    expect(next.tenants[0]).not.toEqual(page.tenants[0]);
  });

  it('names and labels tenants, changes and removes them, and lists by label and name (#30)', async () => {
    const label = `cli${Date.now().toString(36)}`;
    const created = await run(['create-tenant', '--name', 'Acme EU', '--label', `batch=${label}`, '--label', 'plan=pro']);
    expect(created.code, created.stderr).toBe(0);
    const id = (JSON.parse(created.stdout) as { tenant_id: string }).tenant_id;
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'Acme EU', labels: { batch: label, plan: 'pro' } });
    await run(['create-tenant', '--name', 'Other', '--label', `batch=${label}`, '--label', 'plan=free']);
    const updated = await run(['update-tenant', id, '--clear-name', '--label', 'region=eu', '--unlabel', 'plan']);
    expect(updated.code, updated.stderr).toBe(0);
    expect(JSON.parse(updated.stdout)).toMatchObject({ tenant_id: id, name: null, labels: { batch: label, region: 'eu' } });
    expect(JSON.parse(updated.stdout).labels).not.toHaveProperty('plan');
    const byLabel = JSON.parse((await run(['list-tenants', '--label', `batch=${label}`, '--label', 'region=eu'])).stdout) as { tenants: Array<{ tenant_id: string }> };
    expect(byLabel.tenants.map((t) => t.tenant_id)).toEqual([id]);
    const byName = JSON.parse((await run(['list-tenants', '--label', `batch=${label}`, '--search', 'oth'])).stdout) as { tenants: Array<{ name: string }> };
    expect(byName.tenants.map((t) => t.name)).toEqual(['Other']);
    expect(await run(['update-tenant', id, '--label', 'Bad=x'])).toMatchObject({ code: 1, stdout: '', stderr: expect.stringMatching(/^error: the registry refused the name or labels \(400 invalid_tenant_meta\): label key "Bad"/) });
    for (const argv of [['update-tenant', id], ['update-tenant'], ['update-tenant', id, '--name'], ['update-tenant', id, '--name', 'a', '--clear-name'], ['update-tenant', id, '--label', 'novalue'], ['create-tenant', '--unlabel', 'x']]) {
      const res = await run(argv);
      expect(res.code, argv.join(' ')).toBe(2);
      expect(res.stderr).toMatch(/^error: (update|create)-tenant/);
    }
  });

  it('prints the audit log, newest first, of one tenant or all, page by page', async () => {
    const id = (JSON.parse((await run(['create-tenant'])).stdout) as { tenant_id: string }).tenant_id;
    await run(['disable', id]);
    await run(['enable', id]);
    const res = await run(['audit', '--tenant', id, '--limit', '2']);
    expect(res.code).toBe(0);
    const page = JSON.parse(res.stdout) as { entries: Array<{ action: string; tenant_id: string; actor: string; status: number }>; next_cursor: string };
    expect(page.entries.map((e) => [e.action, e.tenant_id, e.status])).toEqual([
      ['enable', id, 200],
      ['disable', id, 200],
    ]);
    expect(page.entries[0]!.actor).toMatch(/^current:[0-9a-f]{8}$/);
    const rest = JSON.parse((await run(['audit', '--tenant', id, '--cursor', page.next_cursor])).stdout) as typeof page;
    expect(rest.entries.map((e) => e.action)).toEqual(['create']);
    expect(rest.next_cursor).toBeNull();
    const all = JSON.parse((await run(['audit'])).stdout) as typeof page;
    expect(all.entries[0]).toMatchObject({ action: 'audit', tenant_id: null });
    expect(await run(['audit', '--tenant', 'nope'])).toEqual({ code: 1, stdout: '', stderr: 'error: "nope" is not a tenant id (400 invalid_tenant_id)' });
    expect((await run(['audit', '--limit', '500'])).stderr).toBe('error: the registry answered 400 invalid_query');
  });

  it('explains an unknown or malformed tenant id', async () => {
    expect(await run(['disable', UNKNOWN_ID])).toEqual({ code: 1, stdout: '', stderr: `error: no tenant ${UNKNOWN_ID} (404 tenant_not_found)` });
    expect(await run(['get-tenant', 'nope'])).toEqual({ code: 1, stdout: '', stderr: 'error: "nope" is not a tenant id (400 invalid_tenant_id)' });
  });

  it('refuses bad usage with exit 2 and prints help on request', async () => {
    for (const argv of [[], ['bogus'], ['get-tenant'], ['disable', 'a', 'b'], ['create-tenant', 'x'], ['list-tenants', '--limit'], ['list-tenants', '--page', '2'], ['audit', '--tenant'], ['audit', '--since', '1d'], ['audit', 'ID']]) {
      const res = await run(argv);
      expect(res.code, argv.join(' ')).toBe(2);
      expect(res.stdout).toBe('');
      expect(res.stderr).toMatch(/error|usage/);
    }
    const help = await run(['help']);
    expect(help.code).toBe(0);
    for (const name of ['create-tenant', 'list-tenants', 'get-tenant', 'disable', 'enable', 'rotate-secret', 'expire-previous', 'revoke-all', 'rotate-host-sync', 'explain-token', 'audit']) {
      expect(help.stdout).toContain(name);
    }
  });

  it('help lines up every description in one column, at least two spaces after its synopsis (#29)', async () => {
    const help = await run(['help']);
    const rows = help.stdout.split('\n').filter((line) => /^ {2}\S/.test(line));
    expect(rows.length).toBe(Object.keys(COMMANDS).length + 1);
    const columns = new Set(rows.map((line) => /^ {2}\S.*?\S {2,}(?=\S)/.exec(line)?.[0].length));
    expect([...columns]).toHaveLength(1);
    expect(columns.has(undefined)).toBe(false);
  });

  it('explain-token refuses bad usage (no token, two tokens, - on a terminal)', async () => {
    for (const argv of [['explain-token'], ['explain-token', 'a', 'b'], ['explain-token', '-']]) {
      const res = await run(argv);
      expect(res.code, argv.join(' ')).toBe(2);
      expect(res.stderr).toMatch(/^error: explain-token/);
    }
  });

  it('says where it looked when no admin token is available', async () => {
    expect(await run(['list-tenants'], { adminToken: undefined })).toEqual({ code: 1, stdout: '', stderr: 'error: ADMIN_TOKEN is not set and /nowhere/secrets.env does not exist' });
  });
});
