import { rotate, sleep } from './scenario';
import { watchCpu, type WorkerHandle } from './workers';

/** One side of a side-by-side row: its load started and stopped per slice, its deliveries counted. */
export interface SliceSide {
  start(): Promise<unknown>;
  stop(): Promise<unknown>;
  /** `counters`: other running totals (CPU time of a server, say), summed per round like the deliveries. */
  count(): Promise<{ delivered: number; atMs: number; counters?: Record<string, number> }>;
  /** The processes whose CPU `limited_by` reports for this side. */
  cpu: WorkerHandle[];
}

export interface SideBySideOptions {
  rounds: number;
  /** Slices a side per round, taken in turns (A B B A A B B A, the order rotated per round); their sums are compared. */
  slices: number;
  sliceMs: number;
  /** Unmeasured load at the start of each slice. */
  sliceWarmupMs: number;
}

/**
 * Two sides of one row measured in turns on the same machine: each round
 * sums each side's deliveries over `slices` slices taken A B B A ..., so a
 * shift in the machine's load during a round falls on both sides alike
 * (with one turn a side, such a shift moved a round's ratio by up to 10%).
 * Returns each round's deliveries per second a side.
 */
export async function sideBySide<K extends string>(
  sides: Record<K, SliceSide>,
  order: readonly [K, K],
  opts: SideBySideOptions,
  onRound?: (round: number, figures: Record<K, number[]>) => void,
): Promise<{ figures: Record<K, number[]>; limited: Partial<Record<K, string>>; counters: Record<K, Array<Record<string, number>>>; delivered: Record<K, number[]> }> {
  const figures = Object.fromEntries(order.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  const deliveredPerRound = Object.fromEntries(order.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  const counters = Object.fromEntries(order.map((k) => [k, [] as Array<Record<string, number>>])) as Record<K, Array<Record<string, number>>>;
  const limited: Partial<Record<K, string>> = {};
  for (let round = 0; round < opts.rounds; round++) {
    const delivered = Object.fromEntries(order.map((k) => [k, 0])) as Record<K, number>;
    const elapsedMs = Object.fromEntries(order.map((k) => [k, 0])) as Record<K, number>;
    const sums = Object.fromEntries(order.map((k) => [k, {} as Record<string, number>])) as Record<K, Record<string, number>>;
    for (let slice = 0; slice < opts.slices; slice++) {
      // The order flips every slice pair, so a drift in the machine's load falls on both sides alike.
      for (const key of rotate(order, round + Math.floor((slice + 1) / 2))) {
        const side = sides[key];
        await side.start();
        await sleep(opts.sliceWarmupMs);
        const cpu = await watchCpu(side.cpu);
        const before = await side.count();
        await sleep(opts.sliceMs);
        const after = await side.count();
        limited[key] = await cpu();
        await side.stop();
        delivered[key] += after.delivered - before.delivered;
        elapsedMs[key] += after.atMs - before.atMs;
        const sum: Record<string, number> = sums[key];
        for (const [name, v] of Object.entries(after.counters ?? {})) sum[name] = (sum[name] ?? 0) + v - (before.counters?.[name] ?? 0);
      }
    }
    for (const key of order) {
      figures[key].push((delivered[key] / elapsedMs[key]) * 1000);
      deliveredPerRound[key].push(delivered[key]);
      counters[key].push(sums[key]);
    }
    onRound?.(round, figures);
  }
  return { figures, limited, counters, delivered: deliveredPerRound };
}
