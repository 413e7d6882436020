import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rawExchange } from '@service-relay/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { readBodyOrRefuse, type BodyReadOptions } from './body-reader';

describe('readBodyOrRefuse', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  async function start(limit: number, opts: BodyReadOptions = {}): Promise<number> {
    server = createServer((req, res) => {
      void readBodyOrRefuse(req, res, limit, opts).then((body) => {
        if (body !== undefined) res.end(`got ${body.length}`);
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return (server.address() as AddressInfo).port;
  }
  const post = (body: string, chunked = false) =>
    chunked
      ? `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
      : `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

  it('a body within the limit is read whole', async () => {
    const port = await start(10);
    expect(await rawExchange(port, post('0123456789'), 500)).toContain('got 10');
  });

  it('past the limit (declared or counted): 413 payload_too_large, the rest read and dropped, and the connection serves the next request', async () => {
    const port = await start(10);
    for (const chunked of [false, true]) {
      const raw = await rawExchange(port, post('x'.repeat(11), chunked) + post('ok'), 500);
      expect(raw).toMatch(/^HTTP\/1\.1 413 /);
      expect(raw).toContain('{"errors":["payload_too_large"]}');
      expect(raw.toLowerCase()).not.toContain('connection: close');
      expect(raw).toContain('got 2');
    }
  });

  it('a body declared past the linger bound is refused with connection: close, nothing read', async () => {
    const port = await start(10, { linger: { maxBytes: 100, maxMs: 1000 } });
    const raw = await rawExchange(port, `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n${'x'.repeat(101)}${post('ok')}`, 500);
    expect(raw).toMatch(/^HTTP\/1\.1 413 /);
    expect(raw.toLowerCase()).toContain('connection: close');
    expect(raw).not.toContain('got 2');
  });

  it('a chunked body that goes on past the linger bound has its connection cut; one that stalls, after maxMs', async () => {
    const port = await start(10, { linger: { maxBytes: 100, maxMs: 300 } });
    const t0 = Date.now();
    const endless = `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${('c8\r\n' + 'x'.repeat(200) + '\r\n').repeat(3)}`;
    const cut = await rawExchange(port, endless, 3000);
    expect(cut).toMatch(/^HTTP\/1\.1 413 /);
    expect(Date.now() - t0).toBeLessThan(250);
    const t1 = Date.now();
    const stalled = await rawExchange(port, `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n${'x'.repeat(11)}\r\n`, 3000);
    expect(stalled).toMatch(/^HTTP\/1\.1 413 /);
    expect(Date.now() - t1).toBeGreaterThanOrEqual(250);
    expect(Date.now() - t1).toBeLessThan(2000);
  });
});
