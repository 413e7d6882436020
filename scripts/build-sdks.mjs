// The workspace's `prepare` (npm ci, npm install): builds the two SDKs'
// dist/ (packages/host, packages/client), which their `exports` point at.
// Here rather than in each package's own `prepare`, because a `prepare` in a
// published manifest makes `npm install ./tarball.tgz` warn about an install
// script. Without devDependencies (the service images) each build skips.
import { spawnSync } from 'node:child_process';
import process from 'node:process';
import { fileURLToPath, URL } from 'node:url';

for (const sdk of ['host', 'client']) {
  const script = fileURLToPath(new URL(`../packages/${sdk}/scripts/build.mjs`, import.meta.url));
  const result = spawnSync(process.execPath, [script], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
