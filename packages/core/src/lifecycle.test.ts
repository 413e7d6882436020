import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('./test-support/slow-stop-main.ts', import.meta.url));

describe('runMain', () => {
  it('finishes a graceful stop when the signal arrives twice (Ctrl-C under npm does that)', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const waitFor = (text: string) =>
      new Promise<void>((resolve) => {
        const check = () => out.includes(text) && resolve();
        child.stdout.on('data', check);
        check();
      });
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
    await waitFor('started');
    child.kill('SIGINT');
    // The second copy lands while the first one's shutdown is under way.
    await waitFor('stopping');
    child.kill('SIGINT');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(out).toContain('stopped cleanly');
  });
});
