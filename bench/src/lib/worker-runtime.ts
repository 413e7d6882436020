import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

/** Process-wide label given by the bench (for ps and error messages). */
export const workerLabel = process.env.BENCH_WORKER_LABEL ?? 'worker';

export interface Usage {
  userUs: number;
  systemUs: number;
  /** Wall clock of the sample (Date.now(), shared by all processes). */
  atMs: number;
  rss: number;
}

const TICK_US = 10_000; // USER_HZ is 100 on every Linux we run on
const PAGE = 4096;

/** Another process's CPU time (utime + stime) and RSS, from /proc (Linux only): peers, Redis servers. */
export function processUsage(pid: number): Usage {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at state: utime and stime are the 12th and 13th of them.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const rssPages = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
  return { userUs: Number(fields[11]) * TICK_US, systemUs: Number(fields[12]) * TICK_US, atMs: performance.timeOrigin + performance.now(), rss: rssPages * PAGE };
}

export type Handler = (args: never) => unknown;
export type Handlers = Record<string, Handler>;

interface Request {
  id: number;
  cmd: string;
  args?: unknown;
}

/**
 * The child side of workers.ts: answers requests with the given handlers plus
 * `usage` (CPU and RSS), `gc-memory` (memory after full GCs when --expose-gc is set)
 * and `exit`. Exits when the parent goes away.
 */
export function serveWorker(handlers: Handlers, onExit?: () => Promise<void> | void): void {
  if (!process.send) throw new Error('a bench worker must be started by the bench (no IPC channel)');
  process.title = `relay-bench:${workerLabel}`;
  let exiting = false;
  const exit = async (code: number) => {
    if (exiting) return;
    exiting = true;
    const timer = setTimeout(() => process.exit(code), 3000);
    timer.unref();
    try {
      await onExit?.();
    } catch {
      // exiting anyway
    }
    process.exit(code);
  };
  const builtins: Handlers = {
    usage: (): Usage => {
      const u = process.cpuUsage();
      return { userUs: u.user, systemUs: u.system, atMs: performance.timeOrigin + performance.now(), rss: process.memoryUsage.rss() };
    },
    'gc-memory': async (): Promise<NodeJS.MemoryUsage> => {
      const gc = (globalThis as { gc?: () => void }).gc;
      if (gc) {
        for (let i = 0; i < 3; i++) {
          gc();
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      return process.memoryUsage();
    },
  };
  process.on('message', (msg: Request) => {
    if (msg.cmd === 'exit') {
      process.send!({ id: msg.id, ok: true, result: null });
      void exit(0);
      return;
    }
    const handler = handlers[msg.cmd] ?? builtins[msg.cmd];
    if (!handler) {
      process.send!({ id: msg.id, ok: false, error: `unknown command ${msg.cmd}` });
      return;
    }
    Promise.resolve()
      .then(() => (handler as (a: unknown) => unknown)(msg.args))
      .then(
        (result) => process.send?.({ id: msg.id, ok: true, result: result ?? null }),
        (err: unknown) => process.send?.({ id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) }),
      );
  });
  process.on('disconnect', () => void exit(0));
  process.on('SIGTERM', () => void exit(0));
  process.send({ ready: true });
}

