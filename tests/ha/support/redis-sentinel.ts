import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, ManagedProcess } from '../../support/processes';
import { track } from '../../faults/support/backends';

export const MASTER_NAME = 'relay';
/** The sentinels' down-after-milliseconds: a master silent this long is subjectively down. */
export const DOWN_AFTER_MS = 1000;

/**
 * A private Sentinel group on loopback: one master, one replica, three
 * sentinels (quorum 2, down-after 1 s). Every process is stopped by its own
 * PID; the data directory is removed.
 */
export class PrivateSentinelGroup {
  readonly data: Array<{ port: number; proc: ManagedProcess }> = [];
  readonly sentinels: Array<{ port: number; proc: ManagedProcess }> = [];

  private constructor(private readonly dir: string) {}

  get url(): string {
    return `redis-sentinel://${this.sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${MASTER_NAME}`;
  }

  static async start(): Promise<PrivateSentinelGroup> {
    const g = new PrivateSentinelGroup(mkdtempSync(join(tmpdir(), 'relay-ha-sentinel-')));
    try {
      const [masterPort, replicaPort] = [await freePort(), await freePort()];
      for (const [i, port] of [masterPort, replicaPort].entries()) {
        const args = [
          '--port', `${port}`, '--bind', '127.0.0.1', '--protected-mode', 'no', '--dir', g.dir, '--dbfilename', `dump-${port}.rdb`,
          // The replica is the durable copy here: it keeps an fsynced AOF (docs/OPERATIONS.md "Redis high availability").
          '--save', '', '--appendonly', i === 0 ? 'no' : 'yes', '--appendfilename', `aof-${port}.aof`, '--appenddirname', `aof-${port}`,
          '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0',
          ...(i === 1 ? ['--replicaof', '127.0.0.1', `${masterPort}`] : []),
        ];
        const proc = track(new ManagedProcess(i === 0 ? 'redis-master' : 'redis-replica', 'redis-server', args, {}));
        g.data.push({ port, proc });
        proc.start();
      }
      await Promise.all(g.data.map((d) => d.proc.waitForOutput('Ready to accept connections', 15_000)));
      await g.data[1]!.proc.waitForOutput('MASTER <-> REPLICA sync: Finished with success', 15_000);
      for (let i = 0; i < 3; i++) {
        const port = await freePort();
        const conf = join(g.dir, `sentinel-${port}.conf`);
        writeFileSync(conf, [
          `port ${port}`, 'bind 127.0.0.1', 'protected-mode no', `dir ${g.dir}`,
          `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${masterPort} 2`,
          `sentinel down-after-milliseconds ${MASTER_NAME} ${DOWN_AFTER_MS}`,
          `sentinel failover-timeout ${MASTER_NAME} 10000`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'));
        const proc = track(new ManagedProcess(`sentinel-${i}`, 'redis-server', [conf, '--sentinel'], {}));
        g.sentinels.push({ port, proc });
        proc.start();
      }
      // Each sentinel has found the replica and the two other sentinels (via the master's hello channel).
      await Promise.all(g.sentinels.map((s) => s.proc.waitForOutput(/\+sentinel sentinel[\s\S]*\+sentinel sentinel/, 20_000)));
      return g;
    } catch (err) {
      await g.stop();
      throw err;
    }
  }

  /** What the sentinels answer for the master now (host:port), asked of the first that answers. */
  async masterAddr(): Promise<string | undefined> {
    for (const s of this.sentinels) {
      if (!s.proc.running) continue;
      const r = new Redis({ port: s.port, host: '127.0.0.1', maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true, connectTimeout: 1000 });
      r.on('error', () => {});
      try {
        const a = (await r.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME)) as [string, string] | null;
        if (a) return `${a[0]}:${a[1]}`;
      } catch {
        // try the next one
      } finally {
        r.disconnect();
      }
    }
    return undefined;
  }

  /** A numeric hash field on one data node (0 when absent or unreachable). */
  async hget(port: number, key: string, field: string): Promise<number> {
    const r = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true, connectTimeout: 1000 });
    r.on('error', () => {});
    try {
      return Number((await r.hget(key, field)) ?? 0);
    } catch {
      return 0;
    } finally {
      r.disconnect();
    }
  }

  /** The data node that is master now. */
  async master(): Promise<{ port: number; proc: ManagedProcess }> {
    const addr = await this.masterAddr();
    const node = this.data.find((d) => `127.0.0.1:${d.port}` === addr);
    if (!node) throw new Error(`sentinels name ${String(addr)} as master, not one of ours`);
    return node;
  }

  /**
   * Starts a data node that was killed again; the sentinels turn it into a
   * replica of the current master. Resolves once it has synced (bounded).
   */
  async rejoin(node: { port: number; proc: ManagedProcess }, timeoutMs = 30_000): Promise<void> {
    const seen = (node.proc.logs.match(/MASTER <-> REPLICA sync: Finished with success/g) ?? []).length;
    node.proc.start();
    const deadline = Date.now() + timeoutMs;
    for (let i = 0; i < 1000 && Date.now() < deadline; i++) {
      if ((node.proc.logs.match(/MASTER <-> REPLICA sync: Finished with success/g) ?? []).length > seen) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`redis on ${node.port} did not sync as a replica within ${timeoutMs} ms\n${node.proc.logs.slice(-1500)}`);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.sentinels, ...this.data].map((n) => (n.proc.running ? n.proc.stop('SIGTERM', 5000) : Promise.resolve(null))));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
