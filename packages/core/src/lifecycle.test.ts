import { spawn } from 'node:child_process';
import { Agent, createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError } from './config';
import { closeServer, startupFailure } from './lifecycle';

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

describe('startupFailure', () => {
  it('a port already taken (a second npm start) says so and what to do, not just EADDRINUSE (#29)', async () => {
    const first = createServer();
    await new Promise<void>((r) => first.listen(0, '127.0.0.1', r));
    const port = (first.address() as AddressInfo).port;
    const second = createServer();
    const err = await new Promise<Error>((resolve) => {
      second.once('error', resolve);
      second.listen(port, '127.0.0.1');
    });
    await closeServer(first);
    const line = startupFailure(err);
    expect(line).toContain(`EADDRINUSE: address already in use 127.0.0.1:${port}`);
    expect(line).toContain('service-relay is already running');
    expect(line).toContain('GATEWAY_PORT');
  });

  it('a config error is its own message; anything else is "startup failed: <message>"', () => {
    expect(startupFailure(new ConfigError('X', 'must be set'))).toBe(new ConfigError('X', 'must be set').message);
    expect(startupFailure(new Error('boom'))).toBe('startup failed: boom');
  });
});
