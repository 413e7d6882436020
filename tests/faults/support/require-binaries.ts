import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';

/**
 * vitest globalSetup for the fault and HA suites: they start their own
 * redis-server and PostgreSQL cluster, so they need those programs (not the
 * shared servers), and openssl for the TLS test's certificates.
 * Fails, never skips, when one is missing.
 */
export default function requireBinaries(): void {
  const problems: string[] = [];
  try {
    execFileSync('redis-server', ['--version'], { stdio: 'ignore' });
  } catch {
    problems.push('redis-server is not on PATH');
  }
  // tests/ha/tls.test.ts makes its certificates with it.
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
  } catch {
    problems.push('openssl is not on PATH');
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
