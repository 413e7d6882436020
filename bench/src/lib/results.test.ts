import { describe, expect, it } from 'vitest';
import { formatMarkdown, formatMisses, formatTable, roundsCell } from './format-table';
import { failedRow, makeRow, roundFigure, roundsToMeet, toJson, validateResults, type Results } from './result-schema';
import { rotate } from './scenario';
import { percentile, summarize } from './stats';

const machine: Results['machine'] = {
  cores: 2,
  cpu_model: 'Test CPU',
  node: 'v20.0.0',
  platform: 'linux',
  arch: 'x64',
  total_mem_mib: 1024,
  load_avg_at_start: [0.5, 0.4, 0.3],
  mode: 'full',
  started_at: '2025-01-01T00:00:00.000Z',
  duration_s: 300,
  redis: 'redis://127.0.0.1:6379',
};

describe('summarize and percentile', () => {
  it('takes the median, min and max of the runs', () => {
    expect(summarize([3, 1, 2])).toMatchObject({ median: 2, min: 1, max: 3 });
    expect(summarize([4, 1, 2, 3]).median).toBe(2.5);
    expect(() => summarize([])).toThrow();
  });
  it('uses the nearest rank', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(values, 99)).toBe(99);
    expect(percentile(values, 100)).toBe(100);
    expect(percentile([5], 99)).toBe(5);
  });
});

describe('makeRow', () => {
  it('orients throughput as ours / baseline and judges the target', () => {
    const row = makeRow({ name: 'x', unit: 'req/s', baselineName: 'b', target: 0.85, ours: [900, 1000, 950], baseline: [1000, 1000, 1100], quick: false });
    expect(row).toMatchObject({ ours: 950, baseline: 1000, ratio: 0.95, met: true, ours_min: 900, ours_max: 1000, runs: 3, lower_is_better: false });
  });
  it('is met when the target holds in 4 of 5 rounds, whatever the ratio of the medians says', () => {
    // Round ratios 1.0, 1.05, 0.97, 1.03, 0.25 against 0.95: four rounds meet it, the medians' ratio (200 / 310) does not.
    const fourOfFive = makeRow({ name: 'r', unit: 'msgs/s', baselineName: 'b', target: 0.95, ours: [100, 200, 300, 400, 100], baseline: [100, 190, 310, 390, 400], quick: false });
    expect(fourOfFive.ratio).toBe(0.645);
    expect(fourOfFive.met).toBe(true);
    // Three rounds of five meet it, though the medians' ratio (1.0) does.
    const threeOfFive = makeRow({ name: 'r', unit: 'msgs/s', baselineName: 'b', target: 0.95, ours: [100, 100, 100, 90, 90], baseline: [100, 100, 100, 100, 100], quick: false });
    expect(threeOfFive.ratio).toBe(1);
    expect(threeOfFive.met).toBe(false);
    expect([1, 3, 4, 5, 10].map(roundsToMeet)).toEqual([1, 3, 4, 4, 8]);
  });
  it('orients memory and latency as baseline / ours', () => {
    const row = makeRow({ name: 'mem', unit: 'KiB/conn', baselineName: 'ws', target: 0.6, ours: [20], baseline: [10], lowerIsBetter: true, quick: false });
    expect(row.ratio).toBe(0.5);
    expect(row.met).toBe(false);
  });
  it('does not judge speed in quick mode', () => {
    expect(makeRow({ name: 'q', unit: 'u', baselineName: 'b', target: 1, ours: [1], baseline: [2], quick: true }).met).toBeNull();
  });
  it('rounds figures to three significant digits', () => {
    expect(roundFigure(123456.7)).toBe(123457);
    expect(roundFigure(12.3456)).toBe(12.3);
    expect(roundFigure(0.012345)).toBe(0.0123);
  });
});

describe('results schema and table', () => {
  const rows = [
    makeRow({ name: 'gateway_auth_ratio', unit: 'req/s', baselineName: 'no auth', target: 0.85, ours: [3500, 3600, 3700], baseline: [4000, 4100, 4200], quick: false, limitedBy: 'gateway 98%' }),
    makeRow({ name: 'revocation_ms_p99', unit: 'ms', baselineName: 'contract bound (1 s)', target: 1, ours: [120, 130, 125], baseline: [1000, 1000, 1000], lowerIsBetter: true, quick: false }),
    failedRow('fanout_ratio', 'msgs/s', 'bare ws', 1, 'boom'),
  ];
  const results: Results = { machine, rows };

  it('accepts a well-formed result and names what is wrong with a bad one', () => {
    expect(validateResults(results)).toEqual([]);
    expect(validateResults({ machine, rows: [{ name: 1 }] })).toContain('rows[0].name is not a string');
    expect(validateResults({ rows: [] })).toContain('machine missing');
    expect(validateResults(null)).toEqual(['results is not an object']);
  });

  it('writes JSON with the issue fields and null for figures that could not be measured', () => {
    const parsed = JSON.parse(toJson(results)) as { rows: Array<Record<string, unknown>> };
    expect(Object.keys(parsed.rows[0]!).slice(0, 8)).toEqual(['name', 'ours', 'baseline', 'baseline_name', 'unit', 'ratio', 'target', 'met']);
    expect(parsed.rows[2]!.ours).toBeNull();
    expect(parsed.rows[2]!.met).toBe(false);
  });

  it('prints one aligned line per row with median (min–max), ratio, target, rounds that held it and met', () => {
    const text = formatTable(rows);
    const lines = text.split('\n');
    expect(lines).toHaveLength(2 + rows.length);
    expect(lines[2]).toMatch(/^gateway_auth_ratio\s+3,600 \(3,500–3,700\)\s+4,100 \(4,000–4,200\)\s+no auth\s+req\/s\s+0\.88\s+≥ 0\.85\s+3\/3\s+yes$/);
    expect(lines[3]).toContain('8.00');
    expect(lines[4]).toMatch(/n\/a.*–\s+NO$/);
    const markdown = formatMarkdown(rows).split('\n');
    expect(markdown).toHaveLength(2 + rows.length);
    expect(markdown[2]).toContain('| 3/3 (0.88, 0.88, 0.88) | yes |');
  });

  it('counts the rounds that held the target, as met judges them', () => {
    const fourOfFive = makeRow({ name: 'r', unit: 'msgs/s', baselineName: 'b', target: 0.95, ours: [100, 200, 300, 400, 100], baseline: [100, 190, 310, 390, 400], quick: false });
    expect(roundsCell(fourOfFive)).toBe('4/5');
    expect(roundsCell(makeRow({ name: 'one', unit: 'ms', baselineName: 'b', target: 1, ours: [5], baseline: [100], quick: false }))).toBe('–');
  });

  it('names the rows that missed their target', () => {
    const misses = formatMisses(rows);
    expect(misses).toContain('fanout_ratio');
    expect(misses).not.toContain('gateway_auth_ratio');
    expect(formatMisses(rows.slice(0, 2))).toBe('every row met its target');
  });
});

describe('rotate', () => {
  it('starts each round at the next target', () => {
    expect(rotate(['a', 'b', 'c'], 0)).toEqual(['a', 'b', 'c']);
    expect(rotate(['a', 'b', 'c'], 1)).toEqual(['b', 'c', 'a']);
    expect(rotate(['a', 'b', 'c'], 5)).toEqual(['c', 'a', 'b']);
  });
});
