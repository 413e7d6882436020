// `build` and `prepack` (--strict), and the workspace root's `prepare` (npm ci): cleans
// dist/ and compiles src/ into it with declarations. An install without
// devDependencies (the service images' `npm ci --omit=dev`) has no compiler
// and no use for the SDK: it skips, loudly; with --strict it fails.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { log } from 'node:console';
import { createRequire } from 'node:module';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL('..', import.meta.url));
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  if (process.argv.includes('--strict')) throw new Error('@service-relay/host: typescript is not installed: npm ci (with devDependencies) first');
  log('@service-relay/host: typescript is not installed (an install without devDependencies); dist/ not built');
  process.exit(0);
}
rmSync(new URL('../dist', import.meta.url), { recursive: true, force: true });
const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit', cwd: root });
process.exit(result.status ?? 1);
