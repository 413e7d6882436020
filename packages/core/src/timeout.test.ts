import { once } from 'node:events';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { withTimeout } from './timeout';

const busy = (ms: number) => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

describe('withTimeout', () => {
  const closers: Array<() => void> = [];
  afterEach(() => {
    for (const c of closers.splice(0)) c();
  });

  /** A client socket and the server's end of it. */
  async function pair(): Promise<{ client: Socket; server: Socket }> {
    const srv = createServer();
    srv.listen(0, '127.0.0.1');
    await once(srv, 'listening');
    const accepted = once(srv, 'connection') as Promise<[Socket]>;
    const client = connect((srv.address() as AddressInfo).port, '127.0.0.1');
    await once(client, 'connect');
    const [server] = await accepted;
    closers.push(() => {
      client.destroy();
      server.destroy();
      srv.close();
    });
    return { client, server };
  }

  it('rejects when no answer comes within the deadline', async () => {
    const { client } = await pair();
    const answer = once(client, 'data');
    await expect(withTimeout(answer, 50)).rejects.toThrow('timed out after 50 ms');
  });

  it('takes an answer that arrived while this process was too busy to read it before the deadline passed', async () => {
    const { client, server } = await pair();
    const answer = once(client, 'data').then(([d]) => String(d));
    const result = withTimeout(answer, 50);
    server.write('pong');
    // The answer is in the socket buffer long before the deadline; the loop is blocked past it.
    busy(200);
    await expect(result).resolves.toBe('pong');
  });
});
