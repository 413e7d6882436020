import { Agent, createServer, request, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createUpstreamAgent } from './upstream-agent';

/** One GET through `agent`; resolves with the socket once it is back in the free pool. */
function getThrough(agent: Agent, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      res.resume();
      res.on('end', () => setImmediate(() => resolve(Object.values(agent.freeSockets).flat()[0] as Socket)));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('createUpstreamAgent', () => {
  let server: Server;
  const agents: Agent[] = [];
  afterEach(async () => {
    for (const a of agents.splice(0)) a.destroy();
    await new Promise((r) => server.close(r));
  });

  it("retires idle upstream sockets before the upstream's keep-alive timeout, so none is reused as it closes", async () => {
    server = createServer((_req, res) => res.end('ok'));
    server.keepAliveTimeout = 5000; // answers carry Keep-Alive: timeout=5
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;

    const ours = createUpstreamAgent();
    agents.push(ours);
    expect((await getThrough(ours, port)).timeout).toBe(4000);

    // Node's default keep-alive agent ignores the hint: its idle sockets never time out.
    const plain = new Agent({ keepAlive: true });
    agents.push(plain);
    expect((await getThrough(plain, port)).timeout ?? 0).toBe(0);
  });
});
