import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../support/processes';
import { git, type ReleaseRef } from '../../support/releases';

/**
 * A release (findPreviousRelease: the one before this checkout's version)
 * checked out and installed beside this checkout for the version-skew
 * upgrade test (docs/OPERATIONS.md "Upgrading from one release to the
 * next"): a detached git worktree in a temporary directory, installed as the
 * service images install (`npm ci --omit=dev`), removed again by remove().
 */

export class ReleaseCheckout {
  private removed = false;

  private constructor(
    readonly release: ReleaseRef,
    /** The worktree: run its services with this as the working directory. */
    readonly dir: string,
    /** `git worktree add` and `npm ci`, each measured. */
    readonly timings: { worktreeMs: number; installMs: number },
  ) {}

  /**
   * `git worktree add --detach <tmp> <commit>`, then `npm ci --omit=dev
   * --prefer-offline` in it: the release as its Dockerfile installs it (no
   * devDependencies; TypeScript runs through tsx, a runtime dependency).
   * A failed install removes the worktree again.
   */
  static async build(release: ReleaseRef): Promise<ReleaseCheckout> {
    const dir = mkdtempSync(join(tmpdir(), `relay-release-${release.version}-`));
    const t0 = Date.now();
    const added = await git(['worktree', 'add', '--detach', dir, release.commit]);
    if (!added.ok) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`git worktree add ${release.commit} failed: ${added.out}`);
    }
    const t1 = Date.now();
    const checkout = new ReleaseCheckout(release, dir, { worktreeMs: t1 - t0, installMs: 0 });
    // If the worker exits without the test's afterAll (a crash, a hook timeout), the worktree still goes.
    process.once('exit', checkout.removeNow);
    try {
      await npmCi(dir);
    } catch (err) {
      await checkout.remove();
      throw err;
    }
    checkout.timings.installMs = Date.now() - t1;
    return checkout;
  }

  /** `git worktree remove --force` (its node_modules too); idempotent. */
  async remove(): Promise<void> {
    if (this.removed) return;
    this.removed = true;
    process.off('exit', this.removeNow);
    const r = await git(['worktree', 'remove', '--force', this.dir], REPO_ROOT, 120_000);
    rmSync(this.dir, { recursive: true, force: true });
    if (!r.ok) await git(['worktree', 'prune']);
  }

  /** The same, synchronously, for process exit. */
  private readonly removeNow = (): void => {
    if (this.removed) return;
    this.removed = true;
    try {
      execFileSync('git', ['worktree', 'remove', '--force', this.dir], { cwd: REPO_ROOT, stdio: 'ignore', timeout: 60_000 });
    } catch {
      // pruned below once the directory is gone
    }
    rmSync(this.dir, { recursive: true, force: true });
    try {
      execFileSync('git', ['worktree', 'prune'], { cwd: REPO_ROOT, stdio: 'ignore', timeout: 60_000 });
    } catch {
      // nothing left to prune
    }
  };
}

/** npm ci in `dir`, without the npm_* variables of an `npm test` around this process (they would configure the inner npm). */
function npmCi(dir: string): Promise<void> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^npm_/i.test(k) && k !== 'INIT_CWD' && k !== 'NODE_ENV') env[k] = v;
  return new Promise((resolve, reject) => {
    execFile('npm', ['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: dir, env, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`npm ci in the previous release's worktree (${dir}) failed: ${err.message}\n${stdout.slice(-2000)}\n${stderr.slice(-2000)}`));
      else resolve();
    });
  });
}
