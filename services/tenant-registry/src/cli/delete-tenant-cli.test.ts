import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';
import { runAdminCli, usage, type CliOutput } from './commands';

let reg: TestRegistry;
beforeAll(async () => {
  reg = await startTestRegistry({ logLevel: 'warn' });
});
afterAll(async () => {
  await reg?.stop();
});

/** The CLI in-process; `answer`: what the operator types at the prompt (absent: no terminal). */
async function run(argv: string[], answer?: string) {
  const out: string[] = [];
  const err: string[] = [];
  const asked: string[] = [];
  const io: CliOutput = {
    out: (t) => out.push(t),
    err: (t) => err.push(t),
    ...(answer !== undefined && {
      ask: async (q: string) => {
        asked.push(q);
        return answer;
      },
    }),
  };
  const code = await runAdminCli(argv, { registryUrl: reg.baseUrl, adminToken: reg.adminToken, secretsFile: '/nowhere/secrets.env' }, io);
  return { code, stdout: out.join('\n'), stderr: err.join('\n'), asked };
}

const create = async () => ((await (await reg.admin('POST', '/admin/tenants')).json()) as { tenant_id: string }).tenant_id;
const exists = async (id: string) => (await reg.admin('GET', `/admin/tenants/${id}`)).status === 200;

describe('admin CLI: delete-tenant', () => {
  it('is in the help', () => {
    expect(usage()).toContain('delete-tenant ID [--yes] [--keep-usage]');
  });

  it('without a terminal, refuses unless --yes (exit 2, nothing deleted)', async () => {
    const id = await create();
    const res = await run(['delete-tenant', id]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('without one, pass --yes');
    expect(await exists(id)).toBe(true);
  });

  it('on a terminal, deletes only when the id is typed back', async () => {
    const id = await create();
    const wrong = await run(['delete-tenant', id], 'yes');
    expect(wrong.code).toBe(2);
    expect(wrong.asked).toEqual(['Type the tenant id to confirm: ']);
    expect(wrong.stderr).toContain('will be deleted for good');
    expect(wrong.stderr).toContain('nothing was deleted');
    expect(await exists(id)).toBe(true);

    const right = await run(['delete-tenant', id], ` ${id} `);
    expect(right.code, right.stderr).toBe(0);
    expect(JSON.parse(right.stdout)).toMatchObject({ tenant_id: id, deleted: true, usage_kept: false });
    expect(right.stderr).toContain(`deleting tenant ${id}: waiting until every instance`);
    expect(right.stderr).toContain(`deleted tenant ${id}`);
    expect(await exists(id)).toBe(false);
  });

  it('--yes --keep-usage deletes at once keeping usage; a repeat succeeds; bad flags and unknown ids are clear errors', async () => {
    const id = await create();
    const kept = await run(['delete-tenant', id, '--yes', '--keep-usage']);
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout)).toMatchObject({ usage_kept: true });
    expect(kept.stderr).toContain('usage kept');
    expect((await run(['delete-tenant', id, '--yes'])).code).toBe(0);
    const unknown = await run(['delete-tenant', '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50', '--yes']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('404 tenant_not_found');
    expect((await run(['delete-tenant', id, '--force'])).code).toBe(2);
    expect((await run(['delete-tenant'])).code).toBe(2);
  });
});
