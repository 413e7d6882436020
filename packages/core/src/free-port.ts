import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * The kernel hands outgoing connections ports from this range; a port picked
 * there (as `listen(0)` does) can be taken by any client socket before the
 * process that is to listen on it binds it (seen: EADDRINUSE on a restarted
 * realtime in the tests, and on the bench's embedded default after 19,000
 * client sockets). So free ports for a later listener are taken below it.
 */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 2048 ? low : 32768;
  } catch {
    return 32768;
  }
}
const PORT_FLOOR = 10_000;
const PORT_CEILING = Math.max(PORT_FLOOR + 1000, ephemeralLow());

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A free loopback port below the ephemeral range, for a listener started later (bounded: 200 candidates). */
export async function freeLoopbackPort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = PORT_FLOOR + Math.floor(Math.random() * (PORT_CEILING - PORT_FLOOR));
    if (await canBind(port)) return port;
  }
  throw new Error(`no free port between ${PORT_FLOOR} and ${PORT_CEILING}`);
}
