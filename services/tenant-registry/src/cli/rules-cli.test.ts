import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { channelRulesJson, DEFAULT_CHANNEL_RULES } from '@service-relay/channels';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';
import { runAdminCli, type CliOutput } from './commands';

const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const CLI = fileURLToPath(new URL('./admin-cli.ts', import.meta.url));
const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';
const DOC = { default: ['subscribe'], channels: [{ pattern: 'chat:*', actions: ['publish', 'subscribe'] }] };
const CANONICAL = { default: ['subscribe'], channels: [{ pattern: 'chat:*', actions: ['subscribe', 'publish'], presence: false }] };

let reg: TestRegistry;
let dir: string;

beforeAll(async () => {
  reg = await startTestRegistry({ env: { PROPAGATION_TIMEOUT_MS: '600' }, logLevel: 'warn' });
  dir = mkdtempSync(join(tmpdir(), 'registry-rules-cli-'));
  writeFileSync(join(dir, 'rules.json'), JSON.stringify(DOC));
  writeFileSync(join(dir, 'bad-action.json'), '{"channels":[{"pattern":"chat:*","actions":["admin"]}]}');
  writeFileSync(join(dir, 'not-json.json'), '{"channels": [');
});
afterAll(async () => {
  await reg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function run(argv: string[], stdin?: CliOutput['stdin']) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliOutput = { out: (t) => out.push(t), err: (t) => err.push(t), ...(stdin && { stdin }) };
  const code = await runAdminCli(argv, { registryUrl: reg.baseUrl, adminToken: reg.adminToken, secretsFile: '/nowhere/secrets.env', workDir: dir }, io);
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

const newTenant = async () => (JSON.parse((await run(['create-tenant'])).stdout) as { tenant_id: string }).tenant_id;

describe('admin CLI: rules', () => {
  it('gets, sets from a file (relative to the working directory), and resets', async () => {
    const id = await newTenant();
    expect(await run(['rules', 'get', id])).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse((await run(['rules', 'get', id])).stdout)).toEqual({ tenant_id: id, version: 0, rules: channelRulesJson(DEFAULT_CHANNEL_RULES) });
    const set = await run(['rules', 'set', id, '--file', 'rules.json']);
    expect(set).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(set.stdout)).toEqual({ tenant_id: id, version: 1, rules: CANONICAL });
    const reset = await run(['rules', 'reset', id]);
    expect(reset.code).toBe(0);
    expect(JSON.parse(reset.stdout)).toEqual({ tenant_id: id, version: 2, rules: channelRulesJson(DEFAULT_CHANNEL_RULES) });
  });

  it('sets from standard input when it is a pipe, and refuses to wait on a terminal', async () => {
    const id = await newTenant();
    const piped = await run(['rules', 'set', id], { isTTY: false, read: async () => JSON.stringify(DOC) });
    expect(piped.code).toBe(0);
    expect(JSON.parse(piped.stdout)).toMatchObject({ version: 1, rules: CANONICAL });
    expect((await run(['rules', 'set', id, '--file', '-'], { isTTY: false, read: async () => '{"default":[]}' })).code).toBe(0);
    const tty = await run(['rules', 'set', id], { isTTY: true, read: () => new Promise(() => {}) });
    expect(tty.code).toBe(2);
    expect(tty.stderr).toMatch(/^error: rules set needs --file F, or the document on standard input/);
  });

  it("prints the registry's problem for a refused document (exit 1) and refuses unreadable or non-JSON files itself (exit 2)", async () => {
    const id = await newTenant();
    expect(await run(['rules', 'set', id, '--file', 'bad-action.json'])).toEqual({
      code: 1,
      stdout: '',
      stderr: 'error: the registry refused the rules document (400 invalid_channel_rules): channels[0].actions must be an array of actions from: subscribe, publish, history, presence',
    });
    const notJson = await run(['rules', 'set', id, '--file', 'not-json.json']);
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/^error: not-json\.json is not JSON \(.+\); run `npm run admin -- help`$/);
    const missing = await run(['rules', 'set', id, '--file', 'nope.json']);
    expect(missing).toEqual({ code: 2, stdout: '', stderr: 'error: cannot read nope.json (ENOENT); run `npm run admin -- help`' });
    expect(JSON.parse((await run(['rules', 'get', id])).stdout)).toMatchObject({ version: 0 });
  });

  it('explains unknown and malformed tenants, and bad usage with exit 2', async () => {
    expect(await run(['rules', 'get', UNKNOWN_ID])).toEqual({ code: 1, stdout: '', stderr: `error: no tenant ${UNKNOWN_ID} (404 tenant_not_found)` });
    expect(await run(['rules', 'reset', 'nope'])).toEqual({ code: 1, stdout: '', stderr: 'error: "nope" is not a tenant id (400 invalid_tenant_id)' });
    for (const argv of [['rules'], ['rules', 'show', UNKNOWN_ID], ['rules', 'get'], ['rules', 'get', UNKNOWN_ID, 'x'], ['rules', 'set', UNKNOWN_ID, '--file'], ['rules', 'set', UNKNOWN_ID, '--path', 'x'], ['rules', 'reset', '--file', 'x']]) {
      const res = await run(argv);
      expect(res.code, argv.join(' ')).toBe(2);
      expect(res.stdout).toBe('');
      expect(res.stderr).toMatch(/^error: .*; run `npm run admin -- help`$/);
    }
    expect((await run(['help'])).stdout).toMatch(/rules get\|set\|reset ID \[--file F\]/);
  });

  it('runs as a process: a document piped on standard input', async () => {
    const id = await newTenant();
    const res = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        ['--import', 'tsx', CLI, 'rules', 'set', id],
        { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '', DATA_DIR: dir, REGISTRY_URL: reg.baseUrl, ADMIN_TOKEN: reg.adminToken }, timeout: 30_000 },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      );
      child.stdin!.end(JSON.stringify(DOC));
    });
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(res.stdout)).toEqual({ tenant_id: id, version: 1, rules: CANONICAL });
  });

  // Last: the stuck consumer keeps its lease a while after it is closed.
  it('exits 3 with the committed rules on stdout when they are not yet confirmed in force everywhere', async () => {
    const id = await newTenant();
    const stuck = await reg.consumer(1500);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    stuck.subscribe(async (e) => {
      if (e.tenant_id === id && e.kind === 'channel_rules') await released;
    });
    try {
      const res = await run(['rules', 'set', id, '--file', 'rules.json']);
      expect(res.code).toBe(3);
      expect(JSON.parse(res.stdout)).toEqual({ tenant_id: id, version: 1, rules: CANONICAL });
      expect(res.stderr).toMatch(/^warning: the change is committed but not yet confirmed in force everywhere \(503 change_not_propagated; waiting on: test-consumer-/);
    } finally {
      release();
      stuck.close();
    }
  });
});
