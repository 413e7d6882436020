import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freeLoopbackPort } from '@service-relay/testkit';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A free loopback port outside the ephemeral range (see @service-relay/testkit). */
export const freePort = freeLoopbackPort;

/** Extra spawn options: run as another OS user (e.g. PostgreSQL, which refuses root), or elsewhere. */
export interface ManagedProcessOptions {
  uid?: number;
  gid?: number;
  cwd?: string;
}

/** A child process whose output is kept, so tests can assert on logs. */
export class ManagedProcess {
  private child: ChildProcess | undefined;
  private output = '';
  private exitWaiters: Array<(code: number | null) => void> = [];
  exitCode: number | null | undefined;

  constructor(
    readonly name: string,
    private readonly command: string,
    private readonly args: string[],
    private env: Record<string, string>,
    private readonly options: ManagedProcessOptions = {},
  ) {}

  /** Changes the environment of the next start (undefined removes a variable), as an operator edits a deployment before a restart. */
  setEnv(changes: Record<string, string | undefined>): void {
    const env = { ...this.env };
    for (const [k, v] of Object.entries(changes)) {
      if (v === undefined) delete env[k];
      else env[k] = v;
    }
    this.env = env;
  }

  /** The environment of the next start (what setEnv left), e.g. to start the same pod from another build. */
  get environment(): Readonly<Record<string, string>> {
    return this.env;
  }

  start(): void {
    this.exitCode = undefined;
    const child = spawn(this.command, this.args, {
      cwd: this.options.cwd ?? REPO_ROOT,
      ...(this.options.uid !== undefined ? { uid: this.options.uid } : {}),
      ...(this.options.gid !== undefined ? { gid: this.options.gid } : {}),
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group: stop() signals the whole group, as Ctrl-C in a
      // terminal does, so nothing the process started can outlive the test.
      detached: true,
    });
    child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    // 'close' (not 'exit'): fires after the output pipes are drained, so logs are complete.
    child.on('close', (code) => {
      this.exitCode = code;
      for (const w of this.exitWaiters.splice(0)) w(code);
    });
    this.child = child;
  }

  get logs(): string {
    return this.output;
  }

  get running(): boolean {
    return this.child !== undefined && this.exitCode === undefined;
  }

  /** The process id while it runs. */
  get pid(): number | undefined {
    return this.running ? this.child!.pid : undefined;
  }

  /**
   * Sends a signal without waiting for an exit (SIGSTOP, SIGCONT, or a
   * shutdown request to await with exited()). `group` signals the whole
   * process group instead of the process alone.
   */
  signal(sig: NodeJS.Signals, group = false): void {
    if (!this.running) throw new Error(`${this.name} is not running`);
    process.kill(group ? -this.child!.pid! : this.child!.pid!, sig);
  }

  /** Resolves with the exit code once the process has exited (rejects after timeoutMs). */
  exited(timeoutMs = 15_000): Promise<number | null> {
    if (!this.running) return Promise.resolve(this.exitCode ?? null);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name} did not exit within ${timeoutMs} ms`)), timeoutMs);
      this.exitWaiters.push((code) => {
        clearTimeout(timer);
        resolve(code);
      });
    });
  }

  /** Resolves when the output contains `text`; rejects if the process exits first. */
  waitForOutput(text: string | RegExp, timeoutMs = 30_000): Promise<void> {
    const has = () => (typeof text === 'string' ? this.output.includes(text) : text.test(this.output));
    return new Promise((resolve, reject) => {
      if (has()) return resolve();
      const onData = () => {
        if (has()) finish();
      };
      const timer = setTimeout(() => finish(new Error(`${this.name}: no "${String(text)}" within ${timeoutMs} ms\n${this.output.slice(-2000)}`)), timeoutMs);
      const onExit = (code: number | null) => finish(new Error(`${this.name} exited (${code}) before "${String(text)}"\n${this.output.slice(-2000)}`));
      const finish = (err?: Error) => {
        clearTimeout(timer);
        this.child?.stdout?.off('data', onData);
        this.child?.stderr?.off('data', onData);
        this.child?.off('close', onExit);
        if (err) reject(err);
        else resolve();
      };
      this.child?.stdout?.on('data', onData);
      this.child?.stderr?.on('data', onData);
      this.child?.once('close', onExit);
    });
  }

  /** Signals the process group and resolves with the exit code. */
  stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 15_000): Promise<number | null> {
    if (!this.running) return Promise.resolve(this.exitCode ?? null);
    const pid = this.child!.pid!;
    const kill = (sig: NodeJS.Signals) => {
      try {
        process.kill(-pid, sig);
      } catch {
        // the group is already gone
      }
    };
    return new Promise((resolve) => {
      const timer = setTimeout(() => kill('SIGKILL'), timeoutMs);
      this.exitWaiters.push((code) => {
        clearTimeout(timer);
        resolve(code);
      });
      kill(signal);
    });
  }
}

/** Runs a command to completion and returns its exit code and output. */
export function runCommand(command: string, args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} timed out\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/**
 * The environment of an `npm start` (embedded default) on free loopback ports
 * in `dataDir`, with the addresses the CLI and the services derive from them.
 */
export async function embeddedEnv(dataDir: string): Promise<EmbeddedEnv> {
  const ports: Record<string, string> = {};
  for (const name of EMBEDDED_PORTS) ports[name] = `${await freePort()}`;
  const env = { ...ports, DATA_DIR: dataDir } as EmbeddedEnv;
  env.REGISTRY_URL = `http://127.0.0.1:${env.REGISTRY_HTTP_PORT}`;
  env.REGISTRY_GRPC_ADDR = `127.0.0.1:${env.REGISTRY_GRPC_PORT}`;
  return env;
}

const EMBEDDED_PORTS = ['GATEWAY_PORT', 'REALTIME_PORT', 'REGISTRY_HTTP_PORT', 'REGISTRY_GRPC_PORT', 'VERIFIER_GRPC_PORT', 'VERIFIER_HTTP_PORT', 'GATEWAY_OPS_PORT', 'REALTIME_OPS_PORT', 'REGISTRY_OPS_PORT'] as const;

export type EmbeddedEnv = Record<string, string> & Record<(typeof EMBEDDED_PORTS)[number] | 'DATA_DIR' | 'REGISTRY_URL' | 'REGISTRY_GRPC_ADDR', string>;

/** Polls an HTTP endpoint until it answers 200 (a process has no other ready signal to await). */
export async function waitForHttp(url: string, timeoutMs = 30_000, proc?: ManagedProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 25;
  for (;;) {
    if (proc && !proc.running) throw new Error(`${proc.name} exited (${proc.exitCode})\n${proc.logs.slice(-3000)}`);
    try {
      const res = await fetch(url);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not ready within ${timeoutMs} ms${proc ? `\n${proc.logs.slice(-3000)}` : ''}`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 250);
  }
}
