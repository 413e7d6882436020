import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { freeLoopbackPort } from './free-port';

describe('freeLoopbackPort', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
  });

  it('never hands out one port twice, even to calls made side by side before any listener binds', async () => {
    const ports = await Promise.all(Array.from({ length: 300 }, () => freeLoopbackPort()));
    expect(new Set(ports).size).toBe(ports.length);
    // Each can then be bound by the listener it was picked for.
    for (const port of ports.slice(0, 50)) {
      const srv = createServer();
      servers.push(srv);
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(port, '127.0.0.1', resolve);
      });
    }
  });

  it('stays below the ephemeral range, where outgoing sockets could take the port first', async () => {
    const low = Number((await import('node:fs')).readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    const port = await freeLoopbackPort();
    expect(port).toBeGreaterThanOrEqual(10_000);
    expect(port).toBeLessThan(low);
  });
});
