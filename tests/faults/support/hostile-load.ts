import { readFileSync } from 'node:fs';
import { ManagedProcess } from '../../support/processes';
import { track } from './backends';

export interface HostileLoadOptions {
  gatewayUrl: string;
  /** Requests per second offered in all (split evenly over the workers). */
  rate: number;
  durationMs: number;
  /** Source addresses 127.0.0.<first>..127.0.0.<first + count - 1>. */
  addresses: number;
  /** A real tenant whose host-sync fetch is tried with wrong secrets. */
  tenantId: string;
  clientId: string;
  workers?: number;
  /** Keep-alive sockets per address (default 4), and a new connection per request instead (default false). */
  lanesPerAddress?: number;
  reconnect?: boolean;
}

export interface HostileLoadResult {
  sent: number;
  notSent: number;
  pending: number;
  counts: Record<string, number>;
  seconds: number;
}

/**
 * The hostile load as separate processes (so it competes for the CPU as an
 * outside attacker would, and the test's own timing stays its own): each
 * worker takes every `workers`-th source address. Tracked by PID, so they
 * are SIGKILLed if the test worker dies; stop() ends them early.
 */
export class HostileLoad {
  private readonly procs: ManagedProcess[] = [];

  constructor(private readonly opts: HostileLoadOptions) {}

  /**
   * Starts the workers, waits until each has loaded (bounded), then tells
   * them all to begin: what the test measures is the load, not the start-up
   * of the processes that offer it (two Node.js processes compiling their
   * TypeScript take the CPU for most of a second).
   */
  async start(): Promise<void> {
    const workers = this.opts.workers ?? 2;
    const all = Array.from({ length: this.opts.addresses }, (_, i) => `127.0.0.${i + 2}`);
    for (let w = 0; w < workers; w++) {
      const args = {
        gatewayUrl: this.opts.gatewayUrl,
        rate: this.opts.rate / workers,
        durationMs: this.opts.durationMs,
        addresses: all.filter((_, i) => i % workers === w),
        tenantId: this.opts.tenantId,
        clientId: this.opts.clientId,
        maxInFlight: 1024,
        lanesPerAddress: this.opts.lanesPerAddress,
        reconnect: this.opts.reconnect,
      };
      const p = track(new ManagedProcess(`hostile-${w}`, process.execPath, ['--import', 'tsx', 'tests/faults/support/hostile-load-worker.ts', JSON.stringify(args)], {}));
      p.start();
      this.procs.push(p);
    }
    await Promise.all(this.procs.map((p) => p.waitForOutput(/^ready$/m, 30_000)));
    for (const p of this.procs) p.signal('SIGUSR2');
  }

  /** Waits (bounded) for every worker's report and sums them. */
  async result(): Promise<HostileLoadResult> {
    const total: HostileLoadResult = { sent: 0, notSent: 0, pending: 0, counts: {}, seconds: 0 };
    for (const p of this.procs) {
      await p.exited(this.opts.durationMs + 15_000).catch(() => p.stop('SIGKILL'));
      const line = p.logs.split('\n').find((l) => l.startsWith('{"sent"'));
      if (!line) throw new Error(`${p.name} reported nothing:\n${p.logs.slice(-1500)}`);
      const r = JSON.parse(line) as HostileLoadResult;
      total.sent += r.sent;
      total.notSent += r.notSent;
      total.pending += r.pending;
      total.seconds = Math.max(total.seconds, r.seconds);
      for (const [k, v] of Object.entries(r.counts)) total.counts[k] = (total.counts[k] ?? 0) + v;
    }
    return total;
  }

  /** SIGKILLs workers still running (a failed test), by PID. */
  async stop(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.stop('SIGKILL', 1000)));
  }
}

/** User + system CPU seconds a process has used so far (Linux /proc), for the figures. */
export function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}
