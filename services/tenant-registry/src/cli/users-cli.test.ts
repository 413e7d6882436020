import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';
import { runAdminCli } from './commands';

const USER = '1b4e28ba-2fa1-41d2-883f-0016d3cca427';
const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';

let reg: TestRegistry;
let tenantId: string;

beforeAll(async () => {
  reg = await startTestRegistry({ logLevel: 'warn' });
  tenantId = ((await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string }).tenant_id;
});
afterAll(async () => {
  await reg?.stop();
});

async function run(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runAdminCli(argv, { registryUrl: reg.baseUrl, adminToken: reg.adminToken, secretsFile: '/nowhere/secrets.env' }, { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

describe('admin CLI: users (an operator’s hand on one user, #13)', () => {
  it('users revoke commits a user_revoked change (default now) and prints the moment in force', async () => {
    const nowS = Math.floor(Date.now() / 1000);
    const res = await run(['users', 'revoke', tenantId, USER]);
    expect(res.code, res.stderr).toBe(0);
    const body = JSON.parse(res.stdout) as { tenant_id: string; user_id: string; issued_before: number };
    expect(body).toMatchObject({ tenant_id: tenantId, user_id: USER });
    expect(body.issued_before).toBeGreaterThanOrEqual(nowS);
    expect(reg.events.at(-1)).toMatchObject({ tenant_id: tenantId, kind: 'user_revoked', detail: { user_id: USER, before: body.issued_before } });
  });

  it('users revoke --before S keeps the latest moment; users disconnect commits user_disconnected', async () => {
    const before = await run(['users', 'revoke', tenantId, USER, '--before', '1700000000']);
    expect(before.code, before.stderr).toBe(0);
    expect((JSON.parse(before.stdout) as { issued_before: number }).issued_before).toBeGreaterThan(1_700_000_000);
    const res = await run(['users', 'disconnect', tenantId, USER]);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({ tenant_id: tenantId, user_id: USER });
    expect(reg.events.at(-1)).toMatchObject({ kind: 'user_disconnected', detail: { user_id: USER } });
  });

  it('records both in the audit log under their own action names', async () => {
    const res = await run(['audit', '--tenant', tenantId]);
    const actions = (JSON.parse(res.stdout) as { entries: Array<{ action: string }> }).entries.map((e) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['revoke_user_tokens', 'disconnect_user']));
  });

  it('exits 1 with the registry’s reason: a future moment names the range, an unknown tenant is tenant_not_found', async () => {
    const future = await run(['users', 'revoke', tenantId, USER, '--before', String(Math.floor(Date.now() / 1000) + 3600)]);
    expect(future.code).toBe(1);
    expect(future.stderr).toMatch(/400 invalid_body: issued_before must be an integer number of unix seconds from 0 to \d+ \(now \+ 60 s\)/);
    const unknown = await run(['users', 'disconnect', UNKNOWN_ID, USER]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/tenant_not_found/);
    const badUser = await run(['users', 'disconnect', tenantId, 'not-a-user']);
    expect(badUser.code).toBe(1);
    expect(badUser.stderr).toMatch(/must be a UUID/);
  });

  it('exits 2 on bad usage', async () => {
    for (const argv of [['users'], ['users', 'drop', tenantId, USER], ['users', 'revoke', tenantId], ['users', 'revoke', tenantId, USER, '--before'], ['users', 'revoke', tenantId, USER, '--before', 'soon'], ['users', 'disconnect', tenantId, USER, 'x']]) {
      expect((await run(argv)).code, argv.join(' ')).toBe(2);
    }
  });
});
