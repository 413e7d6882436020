import { spawn, execFileSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, ManagedProcess, REPO_ROOT } from './support/processes';

const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
const SECTION_START = '## Try it: the production flow in ';
const SECTION_END = '### When a token is refused';
const STEP_TIMEOUT_MS = 60_000;

interface Step {
  script: string;
  /** The README's output block under it; empty when it shows none (then the step prints nothing). */
  expected: string[];
  /** The README says it runs until Ctrl-C. */
  untilCtrlC: boolean;
}

/** The walkthrough's command blocks, each with the output block the README shows under it. */
function walkthrough(): { heading: string; steps: Step[] } {
  const from = README.indexOf(SECTION_START);
  const to = README.indexOf(SECTION_END, from);
  if (from < 0 || to < 0) throw new Error('README.md has no walkthrough section');
  const section = README.slice(from, to);
  const steps: Step[] = [];
  for (const m of section.matchAll(/```sh\n([\s\S]*?)```\n(?:```text\n([\s\S]*?)```\n)?/g)) {
    steps.push({ script: m[1]!, expected: m[2] === undefined ? [] : m[2].replace(/\n$/, '').split('\n'), untilCtrlC: /Runs until Ctrl-C/.test(m[1]!) });
  }
  return { heading: section.slice(0, section.indexOf('\n')), steps };
}

/** A README output line as a pattern: `…` stands for any text on the line. */
function lineMatches(expected: string, actual: string): boolean {
  const pattern = expected.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*?');
  return new RegExp(`^${pattern}$`).test(actual);
}

const words = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];

// #29 item 4: the README's walkthrough as written, every command block in
// order in one shell, in a copy of the working tree (node_modules linked),
// against `npm start` in that copy. The only change to the text: the
// default ports (8080, 8082) become free ones, so the test never meets
// another stack on this machine.
describe('the README walkthrough, as written', () => {
  const { heading, steps } = walkthrough();
  const copy = mkdtempSync(join(tmpdir(), 'relay-readme-'));
  const ports: Record<string, string> = {};
  let relay: ManagedProcess;
  let shell: ChildProcessWithoutNullStreams;
  let stdout = '';
  let stderr = '';
  let rootBefore: string[];

  beforeAll(async () => {
    cpSync(REPO_ROOT, copy, {
      recursive: true,
      filter: (src) => !/^(node_modules|\.data|\.git|artifacts|coverage)(\/|$)/.test(relative(REPO_ROOT, src)),
    });
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(copy, 'node_modules'));
    for (const name of ['GATEWAY_PORT', 'REALTIME_PORT', 'REGISTRY_HTTP_PORT', 'REGISTRY_GRPC_PORT', 'VERIFIER_GRPC_PORT', 'VERIFIER_HTTP_PORT', 'GATEWAY_OPS_PORT', 'REALTIME_OPS_PORT', 'REGISTRY_OPS_PORT']) ports[name] = `${await freePort()}`;
    // The README's first terminal: `npm start` in the copy, nothing else set.
    relay = new ManagedProcess('npm start', 'npm', ['start'], ports, { cwd: copy });
    relay.start();
    await relay.waitForOutput('service-relay is running', 90_000);
    rootBefore = readdirSync(copy).sort();
    // The second terminal: one shell that keeps the variables between steps.
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? copy, REGISTRY_URL: `http://127.0.0.1:${ports.REGISTRY_HTTP_PORT}` };
    shell = spawn('bash', ['--norc', '--noprofile'], { cwd: copy, env, stdio: ['pipe', 'pipe', 'pipe'] });
    shell.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    shell.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  }, 120_000);

  afterAll(async () => {
    shell?.stdin.end();
    shell?.kill('SIGKILL');
    await relay?.stop('SIGINT');
    rmSync(copy, { recursive: true, force: true });
  });

  it('the heading counts the steps', () => {
    expect(steps.length).toBeGreaterThanOrEqual(4);
    expect(heading).toBe(`${SECTION_START}${words[steps.length]} steps`);
    expect(steps.map((s) => s.script.match(/^# (\d+)\./m)?.[1])).toEqual(steps.map((_s, i) => String(i + 1)));
  });

  it('every step prints what the README shows under it, and nothing on stderr', async () => {
    const waitFor = async (done: () => boolean, what: string) => {
      const deadline = Date.now() + STEP_TIMEOUT_MS;
      while (!done()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; stdout so far:\n${stdout}\nstderr:\n${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    for (const [i, step] of steps.entries()) {
      const script = step.script.replaceAll('127.0.0.1:8080', `127.0.0.1:${ports.GATEWAY_PORT}`).replaceAll('127.0.0.1:8082', `127.0.0.1:${ports.REGISTRY_HTTP_PORT}`);
      const marker = `__step_${i + 1}_done__`;
      const outStart = stdout.length;
      const errStart = stderr.length;
      shell.stdin.write(`${script}\necho ${marker}\n`);
      const printed = () => stdout.slice(outStart).split('\n').filter((l) => !l.startsWith('__step_'));
      if (step.untilCtrlC) {
        // Until what the README shows has been printed, then Ctrl-C on the running command.
        await waitFor(() => printed().length > step.expected.length, `step ${i + 1}'s output`);
        const children = execFileSync('pgrep', ['-P', String(shell.pid)]).toString().trim().split('\n').filter(Boolean);
        expect(children.length, `step ${i + 1} should still be running`).toBeGreaterThan(0);
        for (const pid of children) process.kill(Number(pid), 'SIGINT');
      }
      await waitFor(() => stdout.includes(marker), `step ${i + 1} to finish`);
      const lines = stdout.slice(outStart, stdout.indexOf(marker)).replace(/\n$/, '').split('\n').filter((l, n, all) => !(all.length === 1 && l === ''));
      const context = `step ${i + 1}:\n${step.script}\nprinted:\n${lines.join('\n')}\nREADME shows:\n${step.expected.join('\n')}`;
      expect(lines.length, context).toBe(step.expected.length);
      lines.forEach((line, n) => expect(lineMatches(step.expected[n]!, line), context).toBe(true));
      expect(stderr.slice(errStart), context).toBe('');
    }
  });

  it('wrote credentials only under .data/ (ignored by git), nothing else at the root', () => {
    expect(readdirSync(copy).sort()).toEqual(rootBefore);
    expect(readdirSync(join(copy, '.data'))).toEqual(expect.arrayContaining(['tenant.json', 'secret.json']));
    expect(readFileSync(join(copy, '.gitignore'), 'utf8').split('\n')).toContain('.data/');
  });

  it('npm start stops cleanly on Ctrl-C, with no warning', async () => {
    await relay.stop('SIGINT');
    expect(relay.logs).toContain('service-relay stopped cleanly');
    const warnings = relay.logs.split('\n').filter((l) => /"level":(40|50|60)/.test(l));
    expect(warnings).toEqual([]);
  });
});
