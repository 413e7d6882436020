import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { freeLoopbackPort } from '@service-relay/testkit';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processUsage, serveWorker, type Usage } from '../lib/worker-runtime';
import { findPeer, type PeerName } from '../lib/peers';

/**
 * Runs one peer server (nats-server or mosquitto, the Debian binaries) on free
 * loopback ports with a generated config, and answers `usage` and
 * `gc-memory` with the peer's own CPU time and RSS from /proc, so the
 * scenarios measure it exactly as they measure our Node processes. The
 * system's own instances (4222, 1883) are never touched: only the PID started
 * here is stopped.
 */
let child: ChildProcess | undefined;
let dir: string | undefined;

const freePort = freeLoopbackPort;

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

async function configFor(peer: PeerName, wsPort: number): Promise<string> {
  if (peer === 'nats') {
    // Its client port is needed too (never the system's 4222); no JetStream, no monitoring port.
    const clientPort = await freePort();
    return [`listen: "127.0.0.1:${clientPort}"`, 'websocket {', `  listen: "127.0.0.1:${wsPort}"`, '  no_tls: true', '}', ''].join('\n');
  }
  // mosquitto 2.0 will not start with a WebSocket listener alone (its libwebsockets build),
  // so it gets a plain MQTT listener on another free loopback port too. Its libwebsockets
  // listener also ignores the address and listens on every interface, for the run only.
  const mqttPort = await freePort();
  return ['per_listener_settings false', 'allow_anonymous true', 'persistence false', 'log_dest stderr', 'log_type error', `listener ${mqttPort} 127.0.0.1`, `listener ${wsPort} 127.0.0.1`, 'protocol websockets', ''].join('\n');
}

async function start({ peer }: { peer: PeerName }): Promise<{ port: number; pid: number; version: string; dir: string }> {
  const found = findPeer(peer);
  if (!found) throw new Error(`peer missing: ${peer === 'nats' ? 'nats-server' : 'mosquitto'} not installed`);
  dir = mkdtempSync(join(tmpdir(), `relay-bench-${peer}-`));
  const port = await freePort();
  const conf = join(dir, peer === 'nats' ? 'nats.conf' : 'mosquitto.conf');
  writeFileSync(conf, await configFor(peer, port));
  // Its log goes to a file beside the config, quoted if it fails to start.
  const logFile = join(dir, 'peer.log');
  const logFd = openSync(logFile, 'w');
  child = spawn(found.path, ['-c', conf], { stdio: ['ignore', logFd, logFd] });
  closeSync(logFd);
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null) throw new Error(`${peer} exited at start (${child.exitCode}): ${readFileSync(logFile, 'utf8').trim().split('\n').slice(-2).join(' / ')}`);
    if (Date.now() > deadline) throw new Error(`${peer} not listening on ${port} after 10 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { port, pid: child.pid!, version: found.version, dir };
}

/** utime + stime of the peer, and its RSS, from /proc (Linux only). */
function peerUsage(): Usage {
  const pid = child?.pid;
  if (pid === undefined) throw new Error('peer not started');
  return processUsage(pid);
}

function stopPeer(): Promise<void> {
  const c = child;
  child = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
  if (!c || c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => c.kill('SIGKILL'), 2000);
    c.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    c.kill('SIGTERM');
  });
}

serveWorker(
  {
    start,
    usage: peerUsage,
    // A Go or C process has no full GC to force from here: RSS as it stands, after a moment to settle.
    'gc-memory': async () => {
      await new Promise((r) => setTimeout(r, 200));
      const u = peerUsage();
      return { rss: u.rss, heapUsed: NaN, heapTotal: NaN, external: NaN, arrayBuffers: NaN };
    },
  },
  stopPeer,
);
