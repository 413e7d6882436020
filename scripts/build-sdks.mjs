// The workspace's `prepare` (npm ci, npm install): builds the two SDKs'
// dist/ (packages/host, packages/client), which their `exports` point at,
// and the operator console's (packages/console, served by the registry).
// Here rather than in each package's own `prepare`, because a `prepare` in a
// published manifest makes `npm install ./tarball.tgz` warn about an install
// script. Without devDependencies (the service images) each build skips.
import { spawnSync } from 'node:child_process';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

const script = fileURLToPath(new URL('./build-sdk.mjs', import.meta.url));
for (const sdk of ['host', 'client']) {
  const result = spawnSync(process.execPath, [script, fileURLToPath(new URL(`../packages/${sdk}`, import.meta.url))], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
const consoleBuild = spawnSync(process.execPath, [fileURLToPath(new URL('./build-console.mjs', import.meta.url))], { stdio: 'inherit' });
if (consoleBuild.status !== 0) process.exit(consoleBuild.status ?? 1);
