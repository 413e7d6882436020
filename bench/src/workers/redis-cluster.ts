import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { freeLoopbackPort } from '@service-relay/testkit';
import { processUsage, serveWorker, type Usage } from '../lib/worker-runtime';

/**
 * A private Redis Cluster for the `cluster-fanout` scenario: `masters`
 * `redis-server --cluster-enabled yes` processes on free loopback ports (no
 * replicas, no persistence), joined by `redis-cli --cluster create`. Answers
 * `usage` with the three servers' CPU time together (from /proc, as
 * peer-host.ts does for its peer) and `stats` with each one's CPU and its
 * cluster-bus publish counters. Only the PIDs started here are stopped.
 */
let dir: string | undefined;
const nodes: Array<{ port: number; child: ChildProcess }> = [];

function accepts(port: number): Promise<boolean> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  r.on('error', () => {});
  return r
    .connect()
    .then(() => r.ping())
    .then(
      (p) => p === 'PONG',
      () => false,
    )
    .finally(() => r.disconnect());
}

function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: 30_000, env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' } }, (err, stdout, stderr) => (err ? reject(new Error(`redis-cli ${args.join(' ')}: ${err.message} ${stderr}`)) : resolve(stdout)));
  });
}

async function start({ masters }: { masters: number }): Promise<{ ports: number[]; pids: number[]; dir: string; version: string }> {
  dir = mkdtempSync(join(tmpdir(), 'relay-bench-cluster-'));
  for (let i = 0; i < masters; i++) {
    const [port, busPort] = [await freeLoopbackPort(), await freeLoopbackPort()];
    const args = ['--port', `${port}`, '--cluster-port', `${busPort}`, '--bind', '127.0.0.1', '--protected-mode', 'no', '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--dir', dir, '--save', '', '--appendonly', 'no', '--logfile', join(dir, `${port}.log`)];
    const logFd = openSync(join(dir, `${port}.out`), 'w');
    const child = spawn('redis-server', args, { stdio: ['ignore', logFd, logFd] });
    closeSync(logFd);
    nodes.push({ port, child });
  }
  const deadline = Date.now() + 15_000;
  for (const { port, child } of nodes) {
    while (!(await accepts(port))) {
      if (child.exitCode !== null) throw new Error(`redis-server on ${port} exited at start (${child.exitCode})`);
      if (Date.now() > deadline) throw new Error(`redis-server on ${port} not answering after 15 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  await cli(['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '0', '--cluster-yes']);
  const clients = nodes.map((n) => new Redis({ port: n.port, host: '127.0.0.1', maxRetriesPerRequest: 1 }));
  try {
    for (let round = 0; ; round++) {
      const infos = await Promise.all(clients.map((c) => c.cluster('INFO').catch(() => '') as Promise<string>));
      if (infos.every((i) => i.includes('cluster_state:ok') && i.includes('cluster_slots_ok:16384'))) break;
      if (round > 400 || Date.now() > deadline + 20_000) throw new Error('redis cluster not ok after 20 s');
      await new Promise((r) => setTimeout(r, 50));
    }
    const version = /redis_version:(\S+)/.exec(await clients[0]!.info('server'))?.[1] ?? '?';
    return { ports: nodes.map((n) => n.port), pids: nodes.map((n) => n.child.pid!), dir, version };
  } finally {
    for (const c of clients) c.disconnect();
  }
}

/** The servers' CPU time together, as one process: what `limited_by` and the CPU figures measure. */
function usage(): Usage {
  let us = 0;
  let rss = 0;
  for (const n of nodes) {
    const u = processUsage(n.child.pid!);
    us += u.userUs + u.systemUs;
    rss += u.rss;
  }
  return { userUs: us, systemUs: 0, atMs: performance.timeOrigin + performance.now(), rss };
}

/** Per node: CPU µs so far, and the publish messages it sent over the cluster bus (PUBLISH is copied to every other node; SPUBLISH is not). */
async function stats(): Promise<Array<{ port: number; cpuUs: number; busPublishSent: number; busShardPublishSent: number }>> {
  return Promise.all(
    nodes.map(async ({ port, child }) => {
      const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
      try {
        const info = (await r.cluster('INFO')) as string;
        const num = (k: string) => Number(new RegExp(`${k}:(\\d+)`).exec(info)?.[1] ?? 0);
        const u = processUsage(child.pid!);
        return { port, cpuUs: u.userUs + u.systemUs, busPublishSent: num('cluster_stats_messages_publish_sent'), busShardPublishSent: num('cluster_stats_messages_publishshard_sent') };
      } finally {
        r.disconnect();
      }
    }),
  );
}

/** The port of the master serving each key's slot. */
async function owners({ keys }: { keys: string[] }): Promise<number[]> {
  const r = new Redis({ port: nodes[0]!.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  try {
    const ranges = (await r.cluster('SLOTS')) as unknown as Array<[number, number, [string, number]]>;
    const out: number[] = [];
    for (const key of keys) {
      const slot = (await r.cluster('KEYSLOT', key)) as number;
      out.push(ranges.find(([from, to]) => slot >= from && slot <= to)![2][1]);
    }
    return out;
  } finally {
    r.disconnect();
  }
}

async function stop(): Promise<void> {
  await Promise.all(
    nodes.splice(0).map(
      ({ child }) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
}

serveWorker({ start, usage, stats, owners }, stop);
