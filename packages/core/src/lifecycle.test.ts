import { spawn } from 'node:child_process';
import { Agent, createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { closeServer } from './lifecycle';

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

describe('closeServer', () => {
  it('ends a kept-alive connection that is busy at close after its next answer, instead of serving it until the grace cuts it', async () => {
    const server = createServer((_req, res) => void setTimeout(() => res.end('ok'), 50));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const ask = () =>
      new Promise<{ connection: string | undefined; reused: boolean }>((resolve, reject) => {
        const req = get({ port, host: '127.0.0.1', agent, path: '/' }, (res) => {
          res.resume();
          res.on('end', () => resolve({ connection: res.headers.connection, reused: req.reusedSocket }));
        });
        req.on('error', reject);
      });
    try {
      await ask();
      const inFlight = ask();
      await new Promise((r) => setTimeout(r, 10));
      const t0 = Date.now();
      const closed = closeServer(server, 5000);
      // The answer in flight was already under way; the next request on the same connection is the last.
      await inFlight;
      expect(await ask()).toEqual({ connection: 'close', reused: true });
      await closed;
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      agent.destroy();
    }
  });
});
