import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, type Browser } from './support/browser';
import { ManagedProcess, REPO_ROOT } from './support/processes';
import { startStack, type Stack } from './support/stack';
import type { CreatedTenant } from './support/host';

const SCREENSHOT = join(REPO_ROOT, 'artifacts', 'sdk-tarball-browser.png');
const TSC = join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** Runs a command to completion in `cwd`; rejects on a non-zero exit with its output. */
function run(cmd: string, args: string[], cwd: string, env: Record<string, string> = {}, timeoutMs = 60_000): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, timeout: timeoutMs, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env } }, (err, stdout, stderr) => {
      if (err) reject(Object.assign(new Error(`${cmd} ${args.join(' ')} failed (${String(err.code)}):\n${stdout}\n${stderr}`), { stdout, stderr }));
      else resolve({ stdout, stderr });
    });
  });
}

// What the adopting project writes: plain .mjs for node, a typed program for tsc, a page for the bundler.
const HOST_SCRIPT = `
import { createHostClient } from '@service-relay/host';
const host = createHostClient({
  baseUrl: process.env.RELAY_URL,
  tenantId: process.env.TENANT_ID,
  clientId: process.env.HOST_SYNC_CLIENT_ID,
  clientSecret: process.env.HOST_SYNC_CLIENT_SECRET,
});
const [command, ...args] = process.argv.slice(2);
if (command === 'token') console.log(await host.signUserToken(args[0]));
if (command === 'publish') console.log(JSON.stringify(await host.publish(args[0], JSON.parse(args[1]))));
host.close();
`;

const CLIENT_SCRIPT = `
import { createRelayClient } from '@service-relay/client';
// No WebSocket option: on Node 20 the SDK's node entry uses the ws package.
const client = createRelayClient({ url: process.env.RELAY_WS, getToken: async () => process.env.TOKEN });
const channel = client.channel(process.env.CHANNEL);
channel.on('message', async (m) => {
  console.log('message ' + JSON.stringify(m));
  const page = await channel.history({ after: '0-0' });
  console.log('history ' + JSON.stringify(page));
  client.close();
});
await channel.subscribe();
console.log('subscribed ' + channel.state);
`;

const TYPED_PROGRAM = `
import { createHostClient, HostClientError, type UserTokenOptions } from '@service-relay/host';
import { createRelayClient, RelayClientError, type HistoryPage, type RelayMessage } from '@service-relay/client';

const host = createHostClient({ baseUrl: 'http://127.0.0.1:8080', tenantId: '00000000-0000-4000-8000-000000000000', clientId: 'id', clientSecret: 'secret' });
const options: UserTokenOptions = { ttlSeconds: 600, cap: { 'orders.*': ['subscribe', 'history'] } };
const client = createRelayClient({ url: 'ws://127.0.0.1:8080/ws', getToken: () => host.signUserToken('00000000-0000-4000-8000-000000000001', options) });
const orders = client.channel('orders.eu');
orders.on('message', (m: RelayMessage) => console.log(m.id, m.from, m.data));
orders.on('presence', (p) => console.log(p.action, p.member.user_id));
orders.on('gap', (g) => console.log(g.reason));
export async function main(): Promise<void> {
  const page: HistoryPage = await orders.history({ limit: 10 });
  await orders.subscribe({ after: page.messages.at(-1)?.id ?? '0-0', epoch: page.epoch });
  const { id }: { id: string } = await orders.publish({ text: 'hi' });
  console.log(id);
  try {
    await host.signUserToken('alice');
  } catch (err) {
    if (err instanceof HostClientError && err.code === 'token_rule') console.log(err.rule);
    if (err instanceof RelayClientError) console.log(err.code);
  }
}
`;

// Two mistakes the shipped types must catch: an event name that does not exist, a lifetime as a string.
const MISUSE = `import { createRelayClient } from '@service-relay/client';
import { createHostClient } from '@service-relay/host';
createRelayClient({ url: 'ws://x/ws', getToken: async () => 't' }).channel('x').on('mesage', () => {});
void createHostClient({ baseUrl: 'http://x', tenantId: 't', clientId: 'i', clientSecret: 's' }).signUserToken('id', { ttlSeconds: '600' });
`;

const PAGE_SCRIPT = `
import { createRelayClient } from '@service-relay/client';
const { url, token, channel } = window.RELAY;
const client = createRelayClient({ url, getToken: async () => token });
const room = client.channel(channel);
room.on('state', (s) => (document.querySelector('#state').textContent = s));
room.on('message', (m) => {
  const li = document.createElement('li');
  li.textContent = m.from + ': ' + JSON.stringify(m.data);
  document.querySelector('#messages').append(li);
});
room.subscribe();
`;

/**
 * Issue #29 "Must show": both SDKs packed with `npm pack`, installed from the
 * tarballs into a project outside the workspace, and used as an adopter
 * would against the whole stack (every service its own process): plain
 * `node` on the host side and the client side, `tsc` against the shipped
 * types, and a page bundled from the tarball in real Chromium.
 */
describe('the SDKs from their tarballs, in a project outside the repository', () => {
  const work = mkdtempSync(join(tmpdir(), 'relay-adopter-'));
  const project = join(work, 'app');
  let stack: Stack;
  let tenant: CreatedTenant;
  let browser: Browser | undefined;
  let client: ManagedProcess | undefined;
  let pageServer: Server | undefined;
  const tarballs: Record<string, string> = {};
  let installOutput = '';
  const hostEnv = () => ({ RELAY_URL: stack.gatewayUrl, TENANT_ID: tenant.tenant_id, HOST_SYNC_CLIENT_ID: tenant.host_sync_client_id, HOST_SYNC_CLIENT_SECRET: tenant.host_sync_client_secret });
  const host = (...args: string[]) => run(process.execPath, ['host.mjs', ...args], project, hostEnv());

  beforeAll(async () => {
    const packAndInstall = async () => {
      // `npm pack` runs each package's prepare (the tsc build) first, as a publish would.
      const packed = await run('npm', ['pack', '--json', '--pack-destination', work, '-w', '@service-relay/host', '-w', '@service-relay/client'], REPO_ROOT, {}, 90_000);
      for (const p of JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as { name: string; filename: string }[]) tarballs[p.name] = join(work, p.filename);
      mkdirSync(project);
      writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'relay-adopter', version: '1.0.0', private: true, type: 'module' }, null, 2));
      writeFileSync(join(project, 'host.mjs'), HOST_SCRIPT);
      writeFileSync(join(project, 'client.mjs'), CLIENT_SCRIPT);
      writeFileSync(join(project, 'app.ts'), TYPED_PROGRAM);
      writeFileSync(join(project, 'misuse.ts'), MISUSE);
      writeFileSync(join(project, 'page.mjs'), PAGE_SCRIPT);
      writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, target: 'ES2022', lib: ['ES2022'], module: 'NodeNext', moduleResolution: 'NodeNext', types: ['node'], noEmit: true, skipLibCheck: false }, files: ['app.ts', 'misuse.ts'] }));
      // From the npm cache when it has them (the monorepo's install filled it); the registry otherwise.
      const installed = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarballs['@service-relay/host']!, tarballs['@service-relay/client']!, 'ws@^8.18.0', '@types/node@^20.19.0'], project, {}, 90_000);
      installOutput = installed.stdout + installed.stderr;
    };
    const startAll = async () => {
      stack = await startStack();
      const r = await stack.admin('create-tenant');
      expect(r.code, r.stderr).toBe(0);
      tenant = JSON.parse(r.stdout) as CreatedTenant;
    };
    await Promise.all([packAndInstall(), startAll()]);
  }, 180_000);

  afterAll(async () => {
    await client?.stop();
    await browser?.close();
    pageServer?.closeAllConnections();
    pageServer?.close();
    await stack?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('the tarballs hold the build and the docs, no sources or tests, and depend on nothing of the workspace', async () => {
    for (const [name, tgz] of Object.entries(tarballs)) {
      const files = (await run('tar', ['-tzf', tgz], work)).stdout.split('\n').filter(Boolean);
      expect(files, name).toEqual(expect.arrayContaining(['package/package.json', 'package/README.md', 'package/CHANGELOG.md', 'package/dist/index.js', 'package/dist/index.d.ts']));
      expect(files.filter((f) => /\.test\.|\/src\/|testing\//.test(f)), name).toEqual([]);
      const manifest = JSON.parse(readFileSync(join(project, 'node_modules', name, 'package.json'), 'utf8')) as Record<string, unknown>;
      expect(manifest.private, name).toBeUndefined();
      expect(manifest.version, name).toMatch(/^\d+\.\d+\.\d+$/);
      expect(Object.keys({ ...(manifest.dependencies as object), ...(manifest.peerDependencies as object) }).filter((d) => d.startsWith('@service-relay/')), name).toEqual([]);
    }
    expect(Object.keys(tarballs).sort()).toEqual(['@service-relay/client', '@service-relay/host']);
    expect(installOutput).not.toMatch(/npm (warn|error)/i);
  });

  it('plain node: the host fetches the secret, signs and publishes; a node client gets the message through the gateway, then reads it from history', async () => {
    const userId = randomUUID();
    const token = (await host('token', userId)).stdout.trim();
    expect(token.split('.')).toHaveLength(3);
    const channel = `adopt-${randomUUID().slice(0, 8)}`;
    client = new ManagedProcess('adopter-client', process.execPath, ['client.mjs'], { RELAY_WS: `${stack.gatewayUrl.replace(/^http/, 'ws')}/ws`, TOKEN: token, CHANNEL: channel }, { cwd: project });
    client.start();
    await client.waitForOutput('subscribed subscribed', 20_000);
    const published = JSON.parse((await host('publish', channel, '{"text":"from the host"}')).stdout) as { id: string; from: string };
    expect(published.from).toBe('server');
    await client.waitForOutput(/^history /m, 20_000);
    expect(await client.exited(10_000)).toBe(0);
    const line = (prefix: string) => JSON.parse(client!.logs.split('\n').find((l) => l.startsWith(prefix))!.slice(prefix.length)) as Record<string, unknown>;
    expect(line('message ')).toMatchObject({ channel, id: published.id, from: 'server', userId: null, data: { text: 'from the host' } });
    expect(line('history ')).toMatchObject({ channel, recovered: true, messages: [{ id: published.id, data: { text: 'from the host' } }] });
  });

  it('tsc --noEmit passes on a typed program against the shipped types, and catches a misuse', async () => {
    // One tsc run (it is the slow step): app.ts must have no error, misuse.ts exactly its two.
    const out = await run(process.execPath, [TSC, '-p', '.'], project).then(
      () => '',
      (err: { stdout: string }) => err.stdout,
    );
    const errors = out.split('\n').filter((l) => /error TS\d+/.test(l));
    expect(errors.filter((l) => !l.startsWith('misuse.ts'))).toEqual([]);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^misuse\.ts\(3,\d+\): error TS2345: Argument of type '"mesage"'/);
    expect(errors[1]).toMatch(/^misuse\.ts\(4,\d+\): error TS2322: Type 'string' is not assignable to type 'number'/);
  });

  it('a page bundled from the tarball runs the client SDK in Chromium and receives what the host publishes', async () => {
    const bundle = await build({ entryPoints: [join(project, 'page.mjs')], absWorkingDir: project, bundle: true, format: 'esm', platform: 'browser', write: false, logLevel: 'silent' });
    const js = bundle.outputFiles[0]!.text;
    // The browser entry: nothing of the node one (which looks for the ws package).
    expect(js).toContain('createRelayClient');
    expect(js).not.toContain('getBuiltinModule');
    const token = (await host('token', randomUUID())).stdout.trim();
    const channel = `page-${randomUUID().slice(0, 8)}`;
    const config = { url: `${stack.gatewayUrl.replace(/^http/, 'ws')}/ws`, token, channel };
    const html = `<!doctype html><meta charset="utf-8"><title>adopter</title><link rel="icon" href="data:,"><body style="font:16px sans-serif">
<h1>@service-relay/client from its tarball</h1><p>channel ${channel}: <b id="state">unsubscribed</b></p><ul id="messages"></ul>
<script>window.RELAY = ${JSON.stringify(config)};</script><script type="module" src="/app.js"></script></body>`;
    // Served from 127.0.0.1 like the gateway: Chromium's local network access rules stay out of the way.
    pageServer = createServer((req, res) => {
      const [type, body] = req.url === '/app.js' ? ['text/javascript', js] : req.url === '/' ? ['text/html', html] : ['text/plain', ''];
      res.writeHead(body ? 200 : 404, { 'content-type': `${type}; charset=utf-8` }).end(body);
    });
    await new Promise<void>((resolve) => pageServer!.listen(0, '127.0.0.1', resolve));
    browser = await launchChromium();
    const page = await browser.context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await page.goto(`http://127.0.0.1:${(pageServer.address() as AddressInfo).port}/`);
    await page.locator('#state', { hasText: /^subscribed$/ }).waitFor({ timeout: 20_000 });
    await host('publish', channel, '{"text":"hello, browser"}');
    await page.locator('#messages li', { hasText: 'hello, browser' }).waitFor({ timeout: 20_000 });
    expect(await page.locator('#messages li').allInnerTexts()).toEqual(['server: {"text":"hello, browser"}']);
    expect(errors).toEqual([]);
    mkdirSync(join(REPO_ROOT, 'artifacts'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
  });
});
