import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { formatMachine, formatMarkdown, formatMisses, formatTable } from './lib/format-table';
import type { Results } from './lib/result-schema';

/**
 * Prints a results file again without running anything:
 * node --import tsx src/print-results.ts [file] [--markdown]
 * (the README's table comes from `--markdown`).
 */
const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--')) ?? fileURLToPath(new URL('../results/latest.json', import.meta.url));
const results = JSON.parse(readFileSync(file, 'utf8')) as Results;
const table = args.includes('--markdown') ? formatMarkdown(results.rows) : formatTable(results.rows);
process.stdout.write(`${formatMachine(results.machine)}\n\n${table}\n\n${formatMisses(results.rows)}\n`);
for (const r of results.rows) process.stdout.write(`${r.name}: busiest ${r.limited_by ?? 'n/a'}; ${r.note ?? ''}\n`);
