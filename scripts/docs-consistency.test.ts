import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ACTIONS, USER_ACTIONS } from '../services/tenant-registry/src/http/admin-call';

const doc = (name: string) => readFileSync(fileURLToPath(new URL(`../docs/${name}`, import.meta.url)), 'utf8');

/** The cells of a Markdown table row (escaped pipes and pipes inside code spans are not separators). */
function cells(row: string): number {
  let n = 0;
  let code = false;
  for (let i = 1; i < row.length - 1; i++) {
    if (row[i] === '`') code = !code;
    else if (row[i] === '|' && row[i - 1] !== '\\' && !code) n++;
  }
  return n + 1;
}

// #29 item 4: the docs hold, verbatim.
describe('docs tables and lists match the code', () => {
  it.each(['API.md', 'PROTOCOL.md', 'OPERATIONS.md', 'ARCHITECTURE.md'])('%s: every table row has as many cells as its header', (name) => {
    const lines = doc(name).split('\n');
    const bad: string[] = [];
    let width = 0;
    for (const [i, line] of lines.entries()) {
      if (!line.startsWith('|')) {
        width = 0;
        continue;
      }
      if (width === 0) width = cells(line);
      else if (cells(line) !== width) bad.push(`${name}:${i + 1}: ${cells(line)} cells, header ${width}: ${line.slice(0, 120)}`);
    }
    expect(bad).toEqual([]);
  });

  it("API.md's audit action list names every action the admin API records", () => {
    const row = doc('API.md').split('\n').find((l) => l.startsWith('| `action` |'))!;
    const listed = new Set([...row.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]));
    const actions = ['create', 'list', 'get', 'audit', 'explain_token', 'get_channel_rules', 'set_channel_rules', 'reset_channel_rules', 'unknown', ...ACTIONS.map(([, a]) => a), ...USER_ACTIONS.map(([, a]) => a)];
    expect(actions.filter((a) => !listed.has(a))).toEqual([]);
  });
});
