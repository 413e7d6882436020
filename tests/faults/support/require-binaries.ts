import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';

/**
 * vitest globalSetup for the fault suite: it starts its own redis-server and
 * PostgreSQL cluster, so it needs those programs (not the shared servers).
 * Fails, never skips, when one is missing.
 */
export default function requireBinaries(): void {
  const problems: string[] = [];
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
  } catch {
    problems.push('redis-server is not on PATH');
  }
  const pgRoot = '/usr/lib/postgresql';
  const hasPg = (existsSync(pgRoot) && readdirSync(pgRoot).some((v) => existsSync(`${pgRoot}/${v}/bin/initdb`))) || (() => {
    try {
      execFileSync('initdb', ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  if (!hasPg) problems.push('PostgreSQL server binaries (initdb, postgres) not found under /usr/lib/postgresql/*/bin or on PATH');
  if (problems.length > 0) throw new Error(`the fault suite cannot run its own backends:\n  ${problems.join('\n  ')}`);
}
