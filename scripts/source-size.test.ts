import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// #35: no non-test source file over 400 lines (STYLE.md: most under 300). A
// file that grows past it does more than one job: split it along its concerns.
const MAX_LINES = 400;
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SKIPPED_DIRS = new Set(['node_modules', 'dist']);

/** Every .ts file under `dir` but tests, node_modules and build output, as paths from the repository root. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name) && !entry.name.startsWith('.')) out.push(...sources(path));
      // Generated code (the console's API types from docs/openapi.yaml) is not written by hand.
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && !entry.name.endsWith('.generated.ts')) out.push(path);
  }
  return out;
}

function lineCount(path: string): number {
  const text = readFileSync(join(ROOT, path), 'utf8');
  return text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
}

describe(`source files stay under ${MAX_LINES} lines`, () => {
  const files = [...sources('services'), ...sources('packages')];
  const sizes = new Map(files.map((f) => [f, lineCount(f)]));

  it('finds the sources (the walk itself works)', () => {
    expect(files.length).toBeGreaterThan(100);
    expect(sizes.has('services/realtime/src/server.ts')).toBe(true);
  });

  it(`no non-test .ts file under services/ or packages/ has more than ${MAX_LINES} lines`, () => {
    const over = [...sizes].filter(([, n]) => n > MAX_LINES).map(([f, n]) => `${f}: ${n} lines`);
    expect(over).toEqual([]);
  });
});
