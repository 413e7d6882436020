import { summarize } from './stats';

/** The machine a table was measured on. */
export interface Machine {
  cores: number;
  cpu_model: string;
  node: string;
  platform: string;
  arch: string;
  total_mem_mib: number;
  /** 1, 5 and 15 minute load averages: above the core count, something else shared the CPU. */
  load_avg_at_start: number[];
  load_avg_at_end?: number[];
  mode: 'full' | 'quick';
  started_at: string;
  duration_s: number;
  redis: string;
}

/**
 * One row of bench/results/latest.json. The fields the issue fixes come first;
 * the rest say how solid the figure is and what limited it.
 */
export interface Row {
  name: string;
  ours: number;
  baseline: number;
  baseline_name: string;
  unit: string;
  /** Oriented so that higher is better (see `lower_is_better`). */
  ratio: number;
  target: number;
  /**
   * Measured side by side in rounds: the target holds in at least 4 of 5
   * rounds (roundsToMeet), not merely in the ratio of the medians. One
   * measurement a side: the ratio. null in --quick mode, which does not judge speed.
   */
  met: boolean | null;
  ours_min: number;
  ours_max: number;
  baseline_min: number;
  baseline_max: number;
  /** Runs behind each median. */
  runs: number;
  /** True when a smaller raw figure is better (memory, latency): ratio = baseline / ours. */
  lower_is_better: boolean;
  /** ours[i] / baseline[i] (or the inverse) per round: runs in one round share the machine's conditions. */
  round_ratios?: number[];
  /** Which process was busiest while ours ran (CPU share of one core), when known. */
  limited_by?: string;
  /** The same while the baseline ran. */
  baseline_limited_by?: string;
  note?: string;
}

export interface Results {
  machine: Machine;
  rows: Row[];
}

export interface RowInput {
  name: string;
  unit: string;
  baselineName: string;
  target: number;
  ours: readonly number[];
  baseline: readonly number[];
  lowerIsBetter?: boolean;
  quick: boolean;
  limitedBy?: string;
  baselineLimitedBy?: string;
  note?: string;
}

const round = (n: number, digits: number): number => {
  if (!Number.isFinite(n)) return n;
  const f = 10 ** digits;
  return Math.round(n * f) / f;
};

/** Figures keep three significant digits at most; ratios three decimals. */
export function roundFigure(n: number): number {
  if (!Number.isFinite(n) || n === 0) return n;
  const digits = Math.max(0, 2 - Math.floor(Math.log10(Math.abs(n))));
  return round(n, digits);
}

/** Rounds of `n` that must meet a row's target: all but one in five (4 of 5), so all of them below 5 rounds. */
export function roundsToMeet(n: number): number {
  return n - Math.floor(n / 5);
}

export function makeRow(input: RowInput): Row {
  const ours = summarize(input.ours);
  const base = summarize(input.baseline);
  const lower = input.lowerIsBetter ?? false;
  const ratio = lower ? base.median / ours.median : ours.median / base.median;
  const row: Row = {
    name: input.name,
    ours: roundFigure(ours.median),
    baseline: roundFigure(base.median),
    baseline_name: input.baselineName,
    unit: input.unit,
    ratio: round(ratio, 3),
    target: input.target,
    met: null,
    ours_min: roundFigure(ours.min),
    ours_max: roundFigure(ours.max),
    baseline_min: roundFigure(base.min),
    baseline_max: roundFigure(base.max),
    runs: Math.min(ours.runs.length, base.runs.length),
    lower_is_better: lower,
  };
  const paired = input.ours.length === input.baseline.length && input.ours.length > 1;
  const roundRatios = paired ? input.ours.map((o, i) => (lower ? input.baseline[i]! / o : o / input.baseline[i]!)) : [];
  if (paired) row.round_ratios = roundRatios.map((r) => round(r, 3));
  if (!input.quick) row.met = paired ? roundRatios.filter((r) => r >= input.target).length >= roundsToMeet(roundRatios.length) : ratio >= input.target;
  if (input.limitedBy) row.limited_by = input.limitedBy;
  if (input.baselineLimitedBy) row.baseline_limited_by = input.baselineLimitedBy;
  if (input.note) row.note = input.note;
  return row;
}

/** A row for a scenario that could not run: every figure NaN, met false. */
export function failedRow(name: string, unit: string, baselineName: string, target: number, why: string): Row {
  return {
    name,
    ours: NaN,
    baseline: NaN,
    baseline_name: baselineName,
    unit,
    ratio: NaN,
    target,
    met: false,
    ours_min: NaN,
    ours_max: NaN,
    baseline_min: NaN,
    baseline_max: NaN,
    runs: 0,
    lower_is_better: false,
    note: `failed: ${why}`,
  };
}

const REQUIRED: Array<[keyof Row, 'string' | 'number' | 'boolean']> = [
  ['name', 'string'],
  ['ours', 'number'],
  ['baseline', 'number'],
  ['baseline_name', 'string'],
  ['unit', 'string'],
  ['ratio', 'number'],
  ['target', 'number'],
];

/** Problems with a results object (empty when it matches the schema). */
export function validateResults(value: unknown): string[] {
  const problems: string[] = [];
  if (typeof value !== 'object' || value === null) return ['results is not an object'];
  const v = value as { machine?: unknown; rows?: unknown };
  if (typeof v.machine !== 'object' || v.machine === null) problems.push('machine missing');
  else {
    const m = v.machine as Record<string, unknown>;
    if (typeof m.cores !== 'number') problems.push('machine.cores not a number');
    if (typeof m.node !== 'string') problems.push('machine.node not a string');
  }
  if (!Array.isArray(v.rows)) return [...problems, 'rows is not an array'];
  v.rows.forEach((r: unknown, i) => {
    if (typeof r !== 'object' || r === null) return problems.push(`rows[${i}] is not an object`);
    const row = r as Record<string, unknown>;
    for (const [key, type] of REQUIRED) {
      if (typeof row[key] !== type) problems.push(`rows[${i}].${key} is not a ${type}`);
    }
    if (!(row.met === null || typeof row.met === 'boolean')) problems.push(`rows[${i}].met is not a boolean or null`);
  });
  return problems;
}

/** JSON has no NaN: failed figures are written as null. */
export function toJson(results: Results): string {
  return `${JSON.stringify(results, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2)}\n`;
}
