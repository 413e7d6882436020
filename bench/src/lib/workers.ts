import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Usage } from './worker-runtime';

/** Every child the bench started, so one handler can end them all on any exit path. */
const live = new Set<ChildProcess>();
let verbose = false;

export function setVerbose(v: boolean): void {
  verbose = v;
}

export interface WorkerHandle {
  readonly label: string;
  readonly pid: number;
  call<T = unknown>(cmd: string, args?: unknown, timeoutMs?: number): Promise<T>;
  usage(): Promise<Usage>;
  /** Asks the child to stop cleanly, then kills it after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

interface Reply {
  id?: number;
  ok?: boolean;
  result?: unknown;
  error?: string;
  ready?: boolean;
}

export interface StartOptions {
  label?: string;
  env?: Record<string, string>;
  /** Extra node flags, e.g. --expose-gc. */
  nodeFlags?: string[];
  readyTimeoutMs?: number;
}

function profilingFlags(label: string): string[] {
  const only = process.env.BENCH_NODE_FLAGS_FOR?.split(',').filter(Boolean);
  if (only && !only.includes(label)) return [];
  return process.env.BENCH_NODE_FLAGS?.split(/\s+/).filter(Boolean) ?? [];
}

const BENCH_DIR = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Forks bench/src/workers/<name>.ts under tsx with an IPC channel. The child
 * answers { id, cmd, args } requests (see worker-runtime.ts) and exits when the
 * channel closes, so it cannot outlive the bench even if the bench is killed.
 */
export async function startWorker(name: string, opts: StartOptions = {}): Promise<WorkerHandle> {
  const file = fileURLToPath(new URL(`../workers/${name}.ts`, import.meta.url));
  const label = opts.label ?? name;
  const child = fork(file, [], {
    cwd: BENCH_DIR,
    // BENCH_NODE_FLAGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") goes to every child, for profiling,
    // or only to the children labelled in BENCH_NODE_FLAGS_FOR (e.g. "realtime,gateway").
    execArgv: ['--import', 'tsx', ...(opts.nodeFlags ?? []), ...profilingFlags(label)],
    env: { ...process.env, ...opts.env, BENCH_WORKER_LABEL: label },
    stdio: ['ignore', verbose ? 'inherit' : 'ignore', 'inherit', 'ipc'],
  });
  live.add(child);
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  let nextId = 1;
  let exited = false;
  const failAll = (why: string) => {
    for (const p of pending.values()) {
      clearTimeout(p.timer);
      p.reject(new Error(why));
    }
    pending.clear();
  };
  child.on('exit', (code, signal) => {
    exited = true;
    live.delete(child);
    failAll(`worker ${label} exited (${signal ?? code})`);
  });
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker ${label} not ready after ${opts.readyTimeoutMs ?? 60_000} ms`)), opts.readyTimeoutMs ?? 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker ${label} exited during start (${code})`));
    });
    child.on('message', (msg: Reply) => {
      if (msg.ready) {
        clearTimeout(timer);
        resolve();
        return;
      }
      if (msg.id === undefined) return;
      const p = pending.get(msg.id);
      if (!p) return;
      pending.delete(msg.id);
      clearTimeout(p.timer);
      if (msg.ok) p.resolve(msg.result);
      else p.reject(new Error(`${label}: ${msg.error ?? 'failed'}`));
    });
  });
  try {
    await ready;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const call = <T>(cmd: string, args?: unknown, timeoutMs = 120_000): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(new Error(`worker ${label} has exited`));
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`${label}.${cmd} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      child.send({ id, cmd, args });
    });
  return {
    label,
    pid: child.pid!,
    call,
    usage: () => call<Usage>('usage', undefined, 10_000),
    async stop(graceMs = 5000) {
      if (exited) return;
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      call('exit', undefined, graceMs).catch(() => {});
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await gone;
      clearTimeout(timer);
    },
  };
}

const exitHooks = new Set<() => void>();

/** A synchronous cleanup (e.g. removing a temporary directory) that must run on every exit path. */
export function onHardExit(hook: () => void): () => void {
  exitHooks.add(hook);
  return () => exitHooks.delete(hook);
}

/** Kills every child still running (SIGKILL: used on error and exit paths), then runs the exit hooks. */
export function killAllWorkers(): void {
  for (const child of live) {
    if (child.pid !== undefined && child.exitCode === null) child.kill('SIGKILL');
  }
  live.clear();
  for (const hook of exitHooks) {
    try {
      hook();
    } catch {
      // best effort on the way out
    }
  }
  exitHooks.clear();
}

export function liveWorkerCount(): number {
  return live.size;
}

/** CPU share of one core a worker used between two usage samples. */
export function cpuShare(before: Usage, after: Usage): number {
  const cpuMs = (after.userUs - before.userUs + after.systemUs - before.systemUs) / 1000;
  const wallMs = after.atMs - before.atMs;
  return wallMs > 0 ? cpuMs / wallMs : 0;
}

/** Busy CPU time of the whole machine, in ms (Linux /proc/stat; undefined elsewhere). */
function machineBusyMs(): number | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields as [number, number, number, number, number, number, number, number];
    // USER_HZ is 100 on every Linux we run on.
    return (user + nice + system + irq + softirq + steal) * 10;
  } catch {
    return undefined;
  }
}

/**
 * Samples CPU use of several workers and of the whole machine; the returned
 * function, called at the end of a window, says who used how much of a core,
 * busiest first, and how much the rest of the machine (Redis, other
 * processes, other people's work) used meanwhile.
 */
export async function watchCpu(workers: readonly WorkerHandle[]): Promise<() => Promise<string>> {
  const before = await Promise.all(workers.map((w) => w.usage()));
  const machineBefore = machineBusyMs();
  return async () => {
    const after = await Promise.all(workers.map((w) => w.usage()));
    const machineAfter = machineBusyMs();
    const shares = workers.map((w, i) => ({ label: w.label, share: cpuShare(before[i]!, after[i]!) }));
    shares.sort((a, b) => b.share - a.share);
    const parts = shares.map((s) => `${s.label} ${Math.round(s.share * 100)}%`);
    if (machineBefore !== undefined && machineAfter !== undefined) {
      const wall = after[0]!.atMs - before[0]!.atMs;
      const rest = (machineAfter - machineBefore) / wall - shares.reduce((sum, s) => sum + s.share, 0);
      parts.push(`rest of machine ${Math.max(0, Math.round(rest * 100))}%`);
    }
    return parts.join(', ');
  };
}
