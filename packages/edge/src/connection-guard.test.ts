import { createServer, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { closeServer, EnvReader, listen } from '@service-relay/core';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { guardConnections, readConnectionLimits, type ConnectionGuard } from './connection-guard';

const open = (port: number): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  });

/** Everything the server sent until it closed the socket, and how long that took. */
const untilClosed = (s: Socket): Promise<{ text: string; ms: number }> =>
  new Promise((resolve) => {
    const t0 = Date.now();
    let text = '';
    s.on('data', (d: Buffer) => (text += d.toString()));
    s.on('error', () => {});
    s.on('close', () => resolve({ text, ms: Date.now() - t0 }));
  });

describe('guardConnections', () => {
  let server: Server;
  let guard: ConnectionGuard;
  const sockets: Socket[] = [];
  const start = async (limits: { firstByteTimeoutMs: number; maxConnections: number; maxPerAddress: number }) => {
    server = createServer((_req, res) => res.end('ok'));
    guard = guardConnections(server, limits);
    return listen(server, 0);
  };
  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await closeServer(server, 100);
  });

  it('closes a connection that never sends a byte within the timeout', async () => {
    const port = await start({ firstByteTimeoutMs: 300, maxConnections: 10, maxPerAddress: 10 });
    const silent = await open(port);
    sockets.push(silent);
    const { ms } = await untilClosed(silent);
    expect(ms).toBeGreaterThanOrEqual(250);
    expect(ms).toBeLessThan(2000);
    expect(guard.timedOut).toBe(1);
    await vi.waitFor(() => expect(guard.open).toBe(0));
  });

  it('keeps a connection that sent its request', async () => {
    const port = await start({ firstByteTimeoutMs: 300, maxConnections: 10, maxPerAddress: 10 });
    const res = await fetch(`http://127.0.0.1:${port}/`);
    expect(await res.text()).toBe('ok');
    expect(guard.timedOut).toBe(0);
  });

  it('refuses the (N+1)th connection from one address with a 503, and takes new ones once one closes', async () => {
    const port = await start({ firstByteTimeoutMs: 5000, maxConnections: 100, maxPerAddress: 3 });
    for (let i = 0; i < 3; i++) sockets.push(await open(port));
    const extra = await open(port);
    sockets.push(extra);
    const { text } = await untilClosed(extra);
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(text.endsWith('{"errors":["unavailable"]}')).toBe(true);
    expect(guard.refused).toBe(1);
    // Another address (127.0.0.2 is loopback on Linux too) is not affected.
    const other = await new Promise<Socket>((resolve, reject) => {
      const s = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' }, () => resolve(s));
      s.on('error', reject);
    });
    sockets.push(other);
    other.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    expect(await new Promise<string>((resolve) => other.once('data', (d: Buffer) => resolve(d.toString())))).toMatch(/^HTTP\/1\.1 200 /);
    sockets.shift()!.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const again = await open(port);
    sockets.push(again);
    again.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
    expect(await new Promise<string>((resolve) => again.once('data', (d: Buffer) => resolve(d.toString())))).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('applies the total cap across addresses', async () => {
    const port = await start({ firstByteTimeoutMs: 5000, maxConnections: 2, maxPerAddress: 2 });
    for (let i = 0; i < 2; i++) sockets.push(await open(port));
    const extra = await open(port);
    sockets.push(extra);
    expect((await untilClosed(extra)).text).toMatch(/^HTTP\/1\.1 503 /);
    expect(guard.open).toBe(2);
  });

  it('names the cap that refused a connection in X-Relay-Limit', async () => {
    const port = await start({ firstByteTimeoutMs: 5000, maxConnections: 3, maxPerAddress: 2 });
    const from = (localAddress: string) =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect({ port, host: '127.0.0.1', localAddress }, () => resolve(s));
        s.on('error', reject);
        sockets.push(s);
      });
    await from('127.0.0.1');
    await from('127.0.0.1');
    const overAddress = (await untilClosed(await from('127.0.0.1'))).text;
    expect(overAddress).toMatch(/^HTTP\/1\.1 503 [^]*\r\nretry-after: 1\r\nx-relay-limit: 2\r\n/);
    expect(overAddress.endsWith('\r\n\r\n{"errors":["unavailable"]}')).toBe(true);
    await from('127.0.0.2');
    const overTotal = (await untilClosed(await from('127.0.0.3'))).text;
    expect(overTotal).toMatch(/\r\nx-relay-limit: 3\r\n/);
    expect(overTotal.endsWith('\r\n\r\n{"errors":["unavailable"]}')).toBe(true);
  });

  it('reads its limits from the environment', () => {
    expect(readConnectionLimits(new EnvReader({}))).toEqual({ firstByteTimeoutMs: 10_000, maxConnections: 19_000, maxPerAddress: 1_000 });
    expect(readConnectionLimits(new EnvReader({ FIRST_BYTE_TIMEOUT_MS: '500', MAX_CONNECTIONS: '50', MAX_CONNECTIONS_PER_ADDRESS: '5' }))).toEqual({
      firstByteTimeoutMs: 500,
      maxConnections: 50,
      maxPerAddress: 5,
    });
    // Unset, the per-address default follows a smaller total; set above it, the process stops.
    expect(readConnectionLimits(new EnvReader({ MAX_CONNECTIONS: '10' })).maxPerAddress).toBe(10);
    expect(() => readConnectionLimits(new EnvReader({ MAX_CONNECTIONS: '10', MAX_CONNECTIONS_PER_ADDRESS: '11' }))).toThrow(/MAX_CONNECTIONS_PER_ADDRESS must not exceed MAX_CONNECTIONS/);
  });
});

describe('guardConnections: unparseable requests', () => {
  it('answers header overflow and garbage with the contract JSON', async () => {
    const server = createServer((_req, res) => res.end('ok'));
    guardConnections(server, { firstByteTimeoutMs: 5000, maxConnections: 10, maxPerAddress: 10 });
    const port = await listen(server, 0);
    try {
      const big = await open(port);
      big.write(`GET / HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
      const overflow = await untilClosed(big);
      expect(overflow.text).toMatch(/^HTTP\/1\.1 431 /);
      expect(overflow.text.endsWith('{"errors":["headers_too_large"]}')).toBe(true);
      const junk = await open(port);
      junk.write('NOT HTTP AT ALL\r\n\r\n');
      const bad = await untilClosed(junk);
      expect(bad.text).toMatch(/^HTTP\/1\.1 400 /);
      expect(bad.text.endsWith('{"errors":["bad_request"]}')).toBe(true);
    } finally {
      await closeServer(server, 100);
    }
  });
});
