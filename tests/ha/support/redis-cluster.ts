import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, ManagedProcess } from '../../support/processes';
import { track } from '../../faults/support/backends';

/**
 * A private Redis Cluster on loopback: `masters` masters (three by default)
 * and `replicas` replicas of each (none by default), every one a
 * `redis-server --cluster-enabled yes` process, joined by `redis-cli
 * --cluster create`. Stopped by their own PIDs; the data directory is removed.
 */
export class PrivateRedisCluster {
  private constructor(
    private readonly dir: string,
    readonly ports: number[],
    private readonly procs: ManagedProcess[],
  ) {}

  /** redis-cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3 */
  get url(): string {
    return `redis-cluster://${this.ports.map((p) => `127.0.0.1:${p}`).join(',')}`;
  }

  /** SIGKILL one node by its PID (as a crash would); resolves once it is gone. */
  async kill(port: number): Promise<void> {
    const i = this.ports.indexOf(port);
    if (i < 0) throw new Error(`no node on ${port}`);
    await this.procs[i]!.stop('SIGKILL');
  }

  /** SIGSTOP one node: it keeps its sockets and answers nothing. */
  freeze(port: number): void {
    this.procs[this.ports.indexOf(port)]!.signal('SIGSTOP');
  }

  resume(port: number): void {
    this.procs[this.ports.indexOf(port)]!.signal('SIGCONT');
  }

  /** The port of the master that serves `key`'s slot. */
  async nodeOf(key: string): Promise<number> {
    return (await this.slotNodes(key))[0]!;
  }

  /** The ports serving `key`'s slot, as a live node lists them: the master first, then its replicas. */
  async slotNodes(key: string): Promise<number[]> {
    const live = this.ports.filter((_, i) => this.procs[i]!.running);
    for (const port of live) {
      const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => null, connectTimeout: 1000 });
      r.on('error', () => {});
      try {
        const slot = await r.cluster('KEYSLOT', key);
        const ranges = await r.cluster('SLOTS');
        const hit = ranges.find(([from, to]) => slot >= from && slot <= to);
        if (!hit?.[2]) throw new Error(`slot ${slot} is served by no node`);
        return (hit.slice(2) as unknown as Array<[string, number]>).map((n) => n[1]);
      } catch {
        // ask the next node
      } finally {
        r.disconnect();
      }
    }
    throw new Error(`no live node answers for ${key}'s slot`);
  }

  /**
   * Moves `key`'s slot, and the keys in it, to the master on `to` (what a
   * resharding does, one slot): IMPORTING/MIGRATING, MIGRATE in batches, then
   * SETSLOT NODE on the target, the source and the other nodes.
   * `whileMigrating` runs once the keys moved and before the slot changes
   * hands: a write to it is redirected from the source to the target (ASK).
   */
  async migrateSlot(key: string, to: number, whileMigrating?: () => Promise<void>): Promise<void> {
    const from = await this.nodeOf(key);
    const [src, dst] = [new Redis({ port: from, host: '127.0.0.1' }), new Redis({ port: to, host: '127.0.0.1' })];
    try {
      const slot = (await src.cluster('KEYSLOT', key)) as number;
      const [srcId, dstId] = [(await src.cluster('MYID')) as string, (await dst.cluster('MYID')) as string];
      await dst.cluster('SETSLOT', slot, 'IMPORTING', srcId);
      await src.cluster('SETSLOT', slot, 'MIGRATING', dstId);
      for (let i = 0; i < 1000; i++) {
        const keys = (await src.cluster('GETKEYSINSLOT', slot, 100)) as string[];
        if (keys.length === 0) break;
        await src.call('MIGRATE', '127.0.0.1', to, '', 0, 5000, 'KEYS', ...keys);
      }
      await whileMigrating?.();
      await dst.cluster('SETSLOT', slot, 'NODE', dstId);
      await src.cluster('SETSLOT', slot, 'NODE', dstId);
      for (const port of this.ports.filter((p) => p !== from && p !== to)) {
        const r = new Redis({ port, host: '127.0.0.1' });
        await r.cluster('SETSLOT', slot, 'NODE', dstId).finally(() => r.disconnect());
      }
    } finally {
      src.disconnect();
      dst.disconnect();
    }
  }

  static async start(masters = 3, extraArgs: string[] = [], replicas = 0): Promise<PrivateRedisCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'relay-ha-cluster-'));
    const ports: number[] = [];
    const procs: ManagedProcess[] = [];
    const cluster = new PrivateRedisCluster(dir, ports, procs);
    try {
      for (let i = 0; i < masters * (1 + replicas); i++) {
        const [port, busPort] = [await freePort(), await freePort()];
        ports.push(port);
        const args = [
          '--port', `${port}`, '--cluster-port', `${busPort}`, '--bind', '127.0.0.1', '--protected-mode', 'no',
          '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-node-timeout', '2000',
          '--dir', dir, '--dbfilename', `dump-${port}.rdb`, '--save', '', '--appendonly', 'no',
          ...extraArgs,
        ];
        const p = track(new ManagedProcess(`redis-cluster-${i}`, 'redis-server', args, {}));
        procs.push(p);
        p.start();
      }
      await Promise.all(procs.map((p) => p.waitForOutput('Ready to accept connections', 15_000)));
      await runCli(['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', `${replicas}`, '--cluster-yes']);
      await cluster.waitForState('ok', 20_000);
      if (replicas > 0) await cluster.waitForReplicas(replicas, 30_000);
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /** Polls CLUSTER INFO on every node (bounded) until each reports `cluster_state:<state>` and all slots assigned. */
  async waitForState(state: 'ok', timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const clients = this.ports.filter((_, i) => this.procs[i]!.running).map((port) => new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, lazyConnect: true }));
    try {
      for (let round = 0; round < 400 && Date.now() < deadline; round++) {
        const infos = await Promise.all(clients.map((c) => c.cluster('INFO').catch(() => '') as Promise<string>));
        if (infos.every((i) => i.includes(`cluster_state:${state}`) && i.includes('cluster_slots_ok:16384'))) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`redis cluster not ${state} after ${timeoutMs} ms`);
    } finally {
      for (const c of clients) c.disconnect();
    }
  }

  /** Polls (bounded) until every slot range lists `replicas` replicas and each replica's link to its master is up. */
  async waitForReplicas(replicas: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const clients = this.ports.map((port) => new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, lazyConnect: true }));
    try {
      for (let round = 0; round < 600 && Date.now() < deadline; round++) {
        const ranges = (await clients[0]!.cluster('SLOTS').catch(() => [])) as unknown[][];
        const infos = await Promise.all(clients.map((c) => c.info('replication').catch(() => '')));
        const linked = infos.filter((i) => i.includes('role:slave') && i.includes('master_link_status:up')).length;
        if (ranges.length > 0 && ranges.every((r) => r.length === 3 + replicas) && linked === this.ports.length - ranges.length) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`redis cluster replicas not in step after ${timeoutMs} ms`);
    } finally {
      for (const c of clients) c.disconnect();
    }
  }

  /** Deletes every key under `prefix` on every master (SCAN is per node on a Cluster). */
  async deletePrefix(prefix: string): Promise<void> {
    await Promise.all(this.ports.map(async (port) => {
      const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
      try {
        let cursor = '0';
        for (let i = 0; i < 10_000; i++) {
          const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
          // One key at a time: keys of one node may still be in several slots.
          for (const k of keys) await r.unlink(k);
          cursor = next;
          if (cursor === '0') break;
        }
      } finally {
        r.disconnect();
      }
    }));
  }

  async stop(): Promise<void> {
    await Promise.all(this.procs.map((p) => (p.running ? p.stop('SIGTERM', 5000) : Promise.resolve(null))));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function runCli(args: string[], timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', args, { timeout: timeoutMs, env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`redis-cli ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}
