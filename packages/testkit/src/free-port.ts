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
const FETCH_BAD_PORT = 10_080;
const PORT_CEILING = Math.max(PORT_FLOOR + 1000, ephemeralLow());

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * Ports this process handed out. A port is only probed, not held, until its
 * listener starts (often in a child process, seconds later), so without this
 * two calls could hand out the same port (seen: two fault stacks booting side
 * by side, a verifier failing with EADDRINUSE on a port its sibling stack's
 * service had been given).
 */
const handedOut = new Set<number>();

/**
 * Test workers run side by side in separate processes; each draws from its own
 * slice of the range (VITEST_POOL_ID is 1..n), so two workers never pick the
 * same port either. Outside vitest the whole range is used.
 */
function range(): [number, number] {
  // vitest's worker number, not configuration
  const poolId = Number(process.env.VITEST_POOL_ID);
  if (!Number.isInteger(poolId) || poolId < 1) return [PORT_FLOOR, PORT_CEILING];
  const slices = 8;
  const width = Math.floor((PORT_CEILING - PORT_FLOOR) / slices);
  const low = PORT_FLOOR + ((poolId - 1) % slices) * width;
  return [low, low + width];
}

/** A free loopback port below the ephemeral range, for a listener started later (bounded: 200 candidates). */
export async function freeLoopbackPort(): Promise<number> {
  const [low, high] = range();
  for (let i = 0; i < 200; i++) {
    const port = low + Math.floor(Math.random() * (high - low));
    // 10080 is on the Fetch standard's "bad ports" list: Node's fetch refuses to connect to it (seen: a
    // service given 10080 never passed its health check, whose fetch failed at once, every time).
    if (handedOut.has(port) || port === FETCH_BAD_PORT) continue;
    handedOut.add(port);
    if (await canBind(port)) return port;
  }
  throw new Error(`no free port between ${low} and ${high}`);
}
