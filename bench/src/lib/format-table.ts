import type { Machine, Row } from './result-schema';

const fmt = (n: number): string => {
  if (!Number.isFinite(n)) return 'n/a';
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US');
  if (Math.abs(n) >= 100) return n.toFixed(0);
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(2);
};

const range = (median: number, min: number, max: number): string => `${fmt(median)} (${fmt(min)}–${fmt(max)})`;

/** Rounds that held the target of all rounds (`4/5`); `–` for a row with one measurement a side. */
export function roundsCell(row: Row): string {
  const rounds = row.round_ratios;
  if (!rounds || rounds.length === 0) return '–';
  return `${rounds.filter((r) => r >= row.target).length}/${rounds.length}`;
}

function metCell(row: Row): string {
  if (row.met === null) return '–';
  return row.met ? 'yes' : 'NO';
}

/** The rows as aligned text: ours and baseline as median (min–max); rounds: those that held the target. */
export function formatTable(rows: readonly Row[]): string {
  const header = ['name', 'ours (min–max)', 'baseline (min–max)', 'baseline', 'unit', 'ratio', 'target', 'rounds', 'met'];
  const body = rows.map((r) => [
    r.name,
    range(r.ours, r.ours_min, r.ours_max),
    range(r.baseline, r.baseline_min, r.baseline_max),
    r.baseline_name,
    r.unit,
    Number.isFinite(r.ratio) ? r.ratio.toFixed(2) : 'n/a',
    `≥ ${r.target}`,
    roundsCell(r),
    metCell(r),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** The same rows as a Markdown table, for the README; rounds also lists each round's ratio. */
export function formatMarkdown(rows: readonly Row[]): string {
  const head = '| name | ours (min–max) | baseline (min–max) | baseline | unit | ratio | target | rounds | met |';
  const sep = '|---|---|---|---|---|---|---|---|---|';
  const rounds = (r: Row) => (r.round_ratios?.length ? `${roundsCell(r)} (${r.round_ratios.map((x) => x.toFixed(2)).join(', ')})` : roundsCell(r));
  const body = rows.map(
    (r) =>
      `| \`${r.name}\` | ${range(r.ours, r.ours_min, r.ours_max)} | ${range(r.baseline, r.baseline_min, r.baseline_max)} | ${r.baseline_name} | ${r.unit} | ${Number.isFinite(r.ratio) ? r.ratio.toFixed(2) : 'n/a'} | ≥ ${r.target} | ${rounds(r)} | ${metCell(r)} |`,
  );
  return [head, sep, ...body].join('\n');
}

export function formatMachine(m: Machine): string {
  return `${m.mode} run on ${m.cores} × ${m.cpu_model}, ${m.total_mem_mib} MiB, Node ${m.node} (${m.platform}/${m.arch}), load at start ${m.load_avg_at_start.map((l) => l.toFixed(2)).join(' ')}${m.load_avg_at_end ? `, at end ${m.load_avg_at_end.map((l) => l.toFixed(2)).join(' ')}` : ''}, ${m.duration_s.toFixed(0)} s`;
}

/** Rows that missed their target, with what limited them (for the closing note). */
export function formatMisses(rows: readonly Row[]): string {
  const missed = rows.filter((r) => r.met === false);
  if (missed.length === 0) return 'every row met its target';
  return missed
    .map((r) => `missed: ${r.name} ratio ${Number.isFinite(r.ratio) ? r.ratio.toFixed(2) : 'n/a'} < ${r.target}${r.limited_by ? `; busiest: ${r.limited_by}` : ''}${r.note ? `; ${r.note}` : ''}`)
    .join('\n');
}
