import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';
import { runAdminCli, usage, type CliOutput } from './commands';

let reg: TestRegistry;

beforeAll(async () => {
  reg = await startTestRegistry({ env: { PROPAGATION_TIMEOUT_MS: '600' }, logLevel: 'warn' });
});
afterAll(async () => {
  await reg?.stop();
});

async function run(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliOutput = { out: (t) => out.push(t), err: (t) => err.push(t) };
  const code = await runAdminCli(argv, { registryUrl: reg.baseUrl, adminToken: reg.adminToken, secretsFile: '/nowhere/secrets.env' }, io);
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

describe('admin CLI: plans and tenant limits (#30)', () => {
  it('creates, updates, lists and deletes plans; sets a tenant on a plan and its overrides', async () => {
    expect(usage()).toMatch(/set-limits ID \[--set NAME=N\]\.\.\./);
    const created = await run(['create-plan', 'free', '--set', 'max_connections=10', '--set', 'publish_rate_per_s=5']);
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: 'free', limits: { max_connections: 10, publish_rate_per_s: 5 }, version: 1, tenants: 0 });
    const id = (JSON.parse((await run(['create-tenant'])).stdout) as { tenant_id: string }).tenant_id;
    expect((await run(['set-plan', id, 'free'])).code).toBe(0);
    const set = await run(['set-limits', id, '--set', 'max_subscriptions=3', '--set', 'publish_rate_per_s=7']);
    expect(JSON.parse(set.stdout)).toEqual({ tenant_id: id, plan: 'free', overrides: { publish_rate_per_s: 7, max_subscriptions: 3 }, limits: { max_connections: 10, publish_rate_per_s: 7, max_subscriptions: 3 }, limits_version: 2 });
    const updated = await run(['update-plan', 'free', '--set', 'max_connections=20']);
    expect(JSON.parse(updated.stdout)).toMatchObject({ limits: { max_connections: 20 }, version: 2, tenants: 1 });
    expect(JSON.parse((await run(['get-limits', id])).stdout)).toMatchObject({ limits: { max_connections: 20, publish_rate_per_s: 7, max_subscriptions: 3 }, limits_version: 3 });
    expect(JSON.parse((await run(['set-limits', id, '--unset', 'publish_rate_per_s'])).stdout)).toMatchObject({ overrides: { max_subscriptions: 3 } });
    expect(JSON.parse((await run(['set-limits', id, '--replace'])).stdout)).toMatchObject({ plan: null, overrides: {}, limits: {} });
    expect(JSON.parse((await run(['list-plans'])).stdout)).toMatchObject({ plans: [{ name: 'free', tenants: 0 }] });
    expect(JSON.parse((await run(['delete-plan', 'free'])).stdout)).toEqual({ name: 'free', deleted: true });
  });

  it('bad usage exits 2 before any call; a refused document exits 1 with the problem', async () => {
    expect((await run(['set-limits', 'x'])).code).toBe(2);
    expect((await run(['set-limits', 'x', '--set', 'max_connections=many'])).stderr).toMatch(/--set takes NAME=N/);
    expect((await run(['set-plan', 'x'])).code).toBe(2);
    expect((await run(['create-plan', 'p', '--unset', 'max_connections'])).code).toBe(2);
    const refused = await run(['create-plan', 'p', '--set', 'max_message_bytes=70000']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/400 invalid_limits\): max_message_bytes must be a whole number from 1 to 65536/);
  });
});
