import { execFileSync } from 'node:child_process';
import { accessSync, constants, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { onHardExit, type StartOptions, type WorkerHandle } from './workers';

/** Real servers of other projects the bench measures against (Debian's packages). */
export type PeerName = 'nats' | 'mosquitto';

const BINARY: Record<PeerName, string> = { nats: 'nats-server', mosquitto: 'mosquitto' };

/** The peer's binary in /usr/sbin or on PATH, with its version; undefined when not installed. */
export function findPeer(peer: PeerName): { path: string; version: string } | undefined {
  const bin = BINARY[peer];
  const dirs = ['/usr/sbin', ...(process.env.PATH ?? '').split(':').filter(Boolean)];
  for (const dir of dirs) {
    const path = join(dir, bin);
    try {
      accessSync(path, constants.X_OK);
    } catch {
      continue;
    }
    let version = '?';
    try {
      // mosquitto -h exits 3 after printing its version line.
      const out = execFileSync(path, [peer === 'nats' ? '--version' : '-h'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      version = /\d+\.\d+\.\d+/.exec(out)?.[0] ?? version;
    } catch (err) {
      const out = (err as { stdout?: string }).stdout ?? '';
      version = /\d+\.\d+\.\d+/.exec(out)?.[0] ?? version;
    }
    return { path, version };
  }
  return undefined;
}

export interface RunningPeer {
  worker: WorkerHandle;
  /** ws://127.0.0.1:<port> */
  base: string;
  version: string;
}

/**
 * Starts a peer in a peer-host worker. Returns a reason string instead when
 * the binary is missing, so the scenario can fill its row with "peer missing".
 * The peer's PID is also killed by the bench's hard-exit path, in case its
 * host worker is killed before it can stop it.
 */
export async function startPeer(spawn: (name: string, opts?: StartOptions) => Promise<WorkerHandle>, peer: PeerName): Promise<RunningPeer | string> {
  if (!findPeer(peer)) return `peer missing: ${BINARY[peer]} is not installed (.ci/run installs it)`;
  const worker = await spawn('peer-host', { label: BINARY[peer] });
  const { port, pid, version, dir } = await worker.call<{ port: number; pid: number; version: string; dir: string }>('start', { peer });
  // Only if that PID is still the peer started with our generated config (a PID can be reused).
  onHardExit(() => {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir)) process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
    rmSync(dir, { recursive: true, force: true });
  });
  return { worker, base: `ws://127.0.0.1:${port}`, version };
}
