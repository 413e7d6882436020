// Builds one SDK (`node scripts/build-sdk.mjs <package dir> [--strict]`): cleans
// its dist/ and compiles src/ into it with declarations. Run by each SDK's
// `build` and `prepack` (--strict) and by the workspace's `prepare`
// (scripts/build-sdks.mjs, npm ci). An install without devDependencies (the
// service images' `npm ci --omit=dev`) has no compiler and no use for the
// SDK: it skips, loudly; with --strict it fails.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { log } from 'node:console';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import process from 'node:process';

const dir = resolve(process.argv[2] ?? '.');
const { name } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
const require = createRequire(join(dir, 'package.json'));
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  if (process.argv.includes('--strict')) throw new Error(`${name}: typescript is not installed: npm ci (with devDependencies) first`);
  log(`${name}: typescript is not installed (an install without devDependencies); dist/ not built`);
  process.exit(0);
}
rmSync(join(dir, 'dist'), { recursive: true, force: true });
const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit', cwd: dir });
process.exit(result.status ?? 1);
