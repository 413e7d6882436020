import type { Row } from './result-schema';
import { startWorker, type StartOptions, type WorkerHandle } from './workers';
import type { Stack } from '../stack/stack';

/** Sizes and durations of one bench mode. */
export interface Budget {
  quick: boolean;
  /**
   * Rounds of a row measured side by side (the median of these is reported;
   * met when its target holds in 4 of 5 rounds).
   */
  runs: number;
  /** Runs of a row measured against a fixed bound (revocation): every run must hold it. */
  boundRuns: number;
  /** Runs of the gateway rows: ~1 ms of CPU per request makes them the most sensitive to other load. */
  httpRuns: number;
  /** Seconds of measurement per run for throughput rows. */
  seconds: number;
  /**
   * Seconds of measurement per round of the fan-out rows: seven targets of 1,000
   * subscribers each, five rounds; at over 100k deliveries/s a window this long
   * holds hundreds of thousands of them.
   */
  fanoutSeconds: number;
  /** Seconds of warm-up before the first run of a target. */
  warmupSeconds: number;
  /**
   * Seconds of unmeasured load on a gateway target right before each of its
   * timed runs: a server idle for the ~10 s the other targets run pays for a
   * few seconds to regrow the heap V8 shrank meanwhile (bench/README.md
   * "What limits each figure"); every target gets the same.
   */
  roundWarmupSeconds: number;
  /** Subscribers of the fan-out rows. */
  subscribers: number;
  /** Idle connections of the memory row. */
  idleConnections: number;
  /** Connections opened per run of the connect-rate row. */
  connects: number;
  /** Runs of the connect-rate row: one lasts well under a second, so one slow moment moves it most. */
  connectRuns: number;
  /** Connections revoked per run of the revocation row. */
  revoked: number;
}

export const FULL: Budget = { quick: false, runs: 5, boundRuns: 3, httpRuns: 5, seconds: 5, fanoutSeconds: 3, warmupSeconds: 2, roundWarmupSeconds: 1, subscribers: 1000, idleConnections: 2000, connects: 2000, connectRuns: 5, revoked: 1000 };
export const QUICK: Budget = { quick: true, runs: 1, boundRuns: 1, httpRuns: 1, seconds: 1, fanoutSeconds: 1, warmupSeconds: 0.3, roundWarmupSeconds: 0, subscribers: 100, idleConnections: 200, connects: 200, connectRuns: 1, revoked: 100 };

export interface BenchContext {
  budget: Budget;
  /** The running services (registry, verifier, realtime, gateway) and the bench tenant. */
  stack: Stack;
  log(message: string): void;
}

export interface Scenario {
  /** The rows this scenario fills, in table order. */
  rows: Array<{ name: string; unit: string; baselineName: string; target: number }>;
  run(ctx: BenchContext): Promise<Row[]>;
}

/** Runs `body` with a spawner whose workers are all stopped afterwards, also on error. */
export async function withWorkers<T>(body: (spawn: (name: string, opts?: StartOptions) => Promise<WorkerHandle>) => Promise<T>): Promise<T> {
  const spawning: Array<Promise<WorkerHandle>> = [];
  const spawn = (name: string, opts?: StartOptions) => {
    const p = startWorker(name, opts);
    spawning.push(p);
    return p;
  };
  try {
    return await body(spawn);
  } finally {
    // Also the ones still starting when body failed.
    const settled = await Promise.allSettled(spawning);
    await Promise.all(settled.map((s) => (s.status === 'fulfilled' ? s.value.stop(3000) : undefined)));
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Round-robin order for run `round`: A B C, B C A, C A B, so drift hits every target alike. */
export function rotate<T>(items: readonly T[], round: number): T[] {
  const k = round % items.length;
  return [...items.slice(k), ...items.slice(0, k)];
}
