// `prepare` (run by npm ci and npm install): builds dist/ when TypeScript is
// installed. An install without devDependencies (the service images' `npm ci
// --omit=dev`) has no compiler and no use for the client: it skips, loudly.
// `npm run build -w @service-relay/host` always builds, and fails when it cannot.
import { spawnSync } from 'node:child_process';
import { log } from 'node:console';
import { createRequire } from 'node:module';
import process from 'node:process';
import { URL } from 'node:url';

const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  log('@service-relay/host: typescript is not installed (an install without devDependencies); dist/ not built');
  process.exit(0);
}
const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit', cwd: new URL('..', import.meta.url) });
process.exit(result.status ?? 1);
