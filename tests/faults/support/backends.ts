import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { freePort, ManagedProcess } from '../../support/processes';

/**
 * The fault suite's own backends: a Redis server and a PostgreSQL cluster that
 * belong to one test file, on ports of their own, so a test can kill, freeze
 * and restart them. Nothing here touches the machine's shared servers, and
 * every process is stopped by its own PID.
 */

/**
 * Every process this suite started. If the test worker exits without its
 * afterAll (a hook timeout, a crash), this last-resort handler still SIGKILLs
 * them by PID, so no Redis, PostgreSQL or service outlives the run.
 */
const started = new Set<ManagedProcess>();
let exitHookInstalled = false;

export function track(p: ManagedProcess): ManagedProcess {
  started.add(p);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const proc of started) {
        const pid = proc.pid;
        if (pid === undefined) continue;
        try {
          process.kill(pid, 'SIGCONT');
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    });
  }
  return p;
}

function run(cmd: string, args: string[], opts: { uid?: number; gid?: number } = {}, timeoutMs = 30_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { ...opts, timeout: timeoutMs, env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' } }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')} failed: ${err.message}\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

export interface RedisMode {
  /** AOF with `appendfsync always`: every acknowledged write survives a SIGKILL. */
  persistent: boolean;
  /**
   * Without AOF: RDB snapshots after every second with a change (`save 1 1`),
   * so a SIGKILL loses what was acknowledged since the last snapshot.
   */
  rdb?: boolean;
}

export class PrivateRedis {
  private proc: ManagedProcess | undefined;
  private readonly dir: string;
  private admin: Redis | undefined;
  /** Output of every run of this server so far (a restart starts a new process). */
  private pastLogs = '';
  mode: RedisMode = { persistent: false };
  frozen = false;

  private constructor(readonly port: number) {
    this.dir = mkdtempSync(join(tmpdir(), 'relay-faults-redis-'));
  }

  static async start(mode: RedisMode = { persistent: false }): Promise<PrivateRedis> {
    const r = new PrivateRedis(await freePort());
    await r.start(mode);
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  get logs(): string {
    return this.pastLogs + (this.proc?.logs ?? '');
  }

  /** Starts the server (again) on the same port; with `fresh`, the AOF directory is emptied first. */
  async start(mode: RedisMode = this.mode, fresh = false): Promise<void> {
    if (this.running) throw new Error('redis is already running');
    if (fresh) {
      for (const f of readdirSync(this.dir)) rmSync(join(this.dir, f), { recursive: true, force: true });
    }
    this.mode = mode;
    if (this.proc) this.pastLogs += this.proc.logs;
    const args = ['--port', `${this.port}`, '--bind', '127.0.0.1', '--save', mode.rdb && !mode.persistent ? '1 1' : '', '--dir', this.dir, '--protected-mode', 'no'];
    if (mode.persistent) args.push('--appendonly', 'yes', '--appendfsync', 'always');
    else args.push('--appendonly', 'no');
    this.proc = track(new ManagedProcess('redis', 'redis-server', args, {}));
    this.proc.start();
    await this.proc.waitForOutput('Ready to accept connections', 15_000);
    this.frozen = false;
  }

  /** SIGKILL: no shutdown, no final write; resolves once the process is gone. */
  async kill(): Promise<void> {
    if (!this.proc?.running) return;
    if (this.frozen) this.resume();
    await this.proc.stop('SIGKILL');
  }

  /** SIGSTOP: the server keeps its sockets open and answers nothing. */
  freeze(): void {
    this.proc!.signal('SIGSTOP');
    this.frozen = true;
  }

  resume(): void {
    this.proc!.signal('SIGCONT');
    this.frozen = false;
  }

  /** A short-lived admin connection to the private server (CLIENT LIST/KILL, INFO). */
  async command(...args: Array<string | number>): Promise<unknown> {
    this.admin ??= new Redis(this.url, { lazyConnect: false, maxRetriesPerRequest: 1, connectTimeout: 2000, connectionName: 'fault-suite-admin' });
    this.admin.on('error', () => {});
    const [name, ...rest] = args;
    return this.admin.call(String(name), ...rest);
  }

  async stop(): Promise<void> {
    this.admin?.disconnect();
    this.admin = undefined;
    if (this.proc?.running) {
      if (this.frozen) this.resume();
      await this.proc.stop('SIGTERM', 5000);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The OS user PostgreSQL runs as: initdb and postgres refuse to run as root. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('running as root, but there is no "postgres" OS user to run PostgreSQL as');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

function postgresBin(tool: string): string {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root).filter((v) => existsSync(join(root, v, 'bin', tool))).sort((a, b) => Number(b) - Number(a));
    if (versions.length > 0) return join(root, versions[0]!, 'bin', tool);
  }
  return tool; // on PATH
}

/** The PIDs of `root`'s descendants (from /proc), children before grandchildren. */
function descendants(root: number): number[] {
  const parentOf = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // Field 4 of /proc/<pid>/stat, after the parenthesised command name (which may hold spaces).
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parentOf.set(Number(name), ppid);
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  let frontier = [root];
  for (let depth = 0; depth < 8 && frontier.length > 0; depth++) {
    const next = [...parentOf].filter(([, ppid]) => frontier.includes(ppid)).map(([pid]) => pid);
    out.push(...next);
    frontier = next;
  }
  return out;
}

export class PrivatePostgres {
  private proc: ManagedProcess | undefined;
  private pastLogs = '';
  /** PIDs stopped by freeze() and not resumed yet (the postmaster first). */
  private frozenPids: number[] = [];

  get frozen(): boolean {
    return this.frozenPids.length > 0;
  }

  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly user: { uid: number; gid: number } | undefined,
    /** Extra server settings (`-c name=value`). */
    private readonly settings: string[] = [],
  ) {}

  /**
   * initdb into a fresh directory (owned by the postgres user when we are
   * root), then start. `tls`: the server's certificate and key (PEM), served
   * with `ssl=on` (clients may still connect without TLS; pg_stat_ssl tells).
   */
  static async start(opts: { tls?: { cert: string; key: string } } = {}): Promise<PrivatePostgres> {
    const user = postgresUser();
    const dir = mkdtempSync(join(tmpdir(), 'relay-faults-pg-'));
    if (user) chownSync(dir, user.uid, user.gid);
    const pgData = join(dir, 'data');
    await run(postgresBin('initdb'), ['-D', pgData, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'], user ?? {});
    const settings: string[] = [];
    if (opts.tls) {
      // PostgreSQL refuses a key file others can read, or that another user owns.
      for (const [name, pem] of [['server.crt', opts.tls.cert], ['server.key', opts.tls.key]] as const) {
        const file = join(dir, name);
        writeFileSync(file, pem);
        chmodSync(file, 0o600);
        if (user) chownSync(file, user.uid, user.gid);
      }
      settings.push('-c', 'ssl=on', '-c', `ssl_cert_file=${join(dir, 'server.crt')}`, '-c', `ssl_key_file=${join(dir, 'server.key')}`);
    }
    const p = new PrivatePostgres(await freePort(), dir, user, settings);
    await p.start();
    return p;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  get logs(): string {
    return this.pastLogs + (this.proc?.logs ?? '');
  }

  async start(): Promise<void> {
    if (this.running) throw new Error('postgres is already running');
    if (this.proc) this.pastLogs += this.proc.logs;
    const args = [
      '-D', join(this.dir, 'data'), '-p', `${this.port}`, '-k', this.dir,
      '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off',
      '-c', 'max_connections=100', '-c', 'shared_buffers=16MB',
      ...this.settings,
    ];
    this.proc = track(new ManagedProcess('postgres', postgresBin('postgres'), args, { LC_ALL: 'C' }, { ...(this.user ?? {}), cwd: this.dir }));
    this.proc.start();
    await this.proc.waitForOutput('database system is ready to accept connections', 30_000);
  }

  /**
   * Hangs the cluster: SIGSTOP to the postmaster (so it forks nothing new),
   * then to every backend and auxiliary process it has. Sockets stay open and
   * the kernel still accepts connections into the listen backlog; nothing answers.
   * Returns how many processes were stopped.
   */
  freeze(): number {
    if (this.frozen) throw new Error('postgres is already frozen');
    const postmaster = this.proc?.pid;
    if (postmaster === undefined) throw new Error('postgres is not running');
    process.kill(postmaster, 'SIGSTOP');
    this.frozenPids = [postmaster];
    for (const pid of descendants(postmaster)) {
      try {
        process.kill(pid, 'SIGSTOP');
        this.frozenPids.push(pid);
      } catch {
        // exited meanwhile
      }
    }
    return this.frozenPids.length;
  }

  /** SIGCONT to exactly the processes freeze() stopped, children first. */
  resume(): void {
    for (const pid of this.frozenPids.slice().reverse()) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // exited meanwhile
      }
    }
    this.frozenPids = [];
  }

  /** Fast shutdown (SIGINT to the postmaster): clients are disconnected, the cluster stops cleanly. */
  async stop(): Promise<void> {
    if (this.frozen) this.resume();
    if (!this.proc?.running) return;
    this.proc.signal('SIGINT');
    await this.proc.exited(20_000).catch(async () => {
      await this.proc!.stop('SIGKILL');
    });
  }

  /** A direct query, as a test's own observer of what the registry committed. */
  async query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> {
    const c = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2000 });
    await c.connect();
    try {
      return (await c.query<R>(sql, params)).rows;
    } finally {
      await c.end().catch(() => {});
    }
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
