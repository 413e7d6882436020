import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './processes';

/**
 * Releases as CHANGELOG.md records them (Keep a Changelog, semantic
 * versions): `## [X.Y.Z] - date` per release, newest first, and in a
 * released version's section the line "Git tag `vX.Y.Z`, commit `<40 hex>`."
 * The commit is what a clone without tags still finds the release by.
 */

export interface ChangelogRelease {
  version: string;
  date: string | undefined;
  /** The full commit id recorded in the section, if any. */
  commit: string | undefined;
}

const VERSION = /^(\d+)\.(\d+)\.(\d+)$/;

export function compareVersions(a: string, b: string): number {
  const pa = VERSION.exec(a);
  const pb = VERSION.exec(b);
  if (!pa || !pb) throw new Error(`not a semantic version (X.Y.Z): ${!pa ? a : b}`);
  for (let i = 1; i <= 3; i++) {
    const d = Number(pa[i]) - Number(pb[i]);
    if (d !== 0) return d;
  }
  return 0;
}

/** Every `## [X.Y.Z]` section, in file order (`[Unreleased]` is not a release). */
export function parseChangelog(text: string): ChangelogRelease[] {
  const out: ChangelogRelease[] = [];
  const headings = [...text.matchAll(/^## \[([^\]]+)\](?: - (\S+))?[^\n]*$/gm)];
  for (const [i, h] of headings.entries()) {
    if (!VERSION.test(h[1]!)) continue;
    const body = text.slice(h.index + h[0].length, headings[i + 1]?.index ?? text.length);
    out.push({ version: h[1]!, date: h[2], commit: /commit `([0-9a-f]{40})`/.exec(body)?.[1] });
  }
  return out;
}

/** The root package.json's version: the release this checkout is (or becomes). */
export function currentVersion(root = REPO_ROOT): string {
  return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
}

export function readChangelog(root = REPO_ROOT): ChangelogRelease[] {
  return parseChangelog(readFileSync(join(root, 'CHANGELOG.md'), 'utf8'));
}

/** The newest release in CHANGELOG.md older than `version`; throws, naming what is missing, when there is none. */
export function previousRelease(version: string, releases: readonly ChangelogRelease[]): ChangelogRelease {
  if (!releases.some((r) => r.version === version)) throw new Error(`CHANGELOG.md has no "## [${version}]" section for the version in package.json`);
  const older = releases.filter((r) => compareVersions(r.version, version) < 0).sort((a, b) => compareVersions(b.version, a.version));
  if (older.length === 0) throw new Error(`CHANGELOG.md names no release before ${version}`);
  return older[0]!;
}

export interface ReleaseRef {
  version: string;
  commit: string;
  /** How it was found: its tag, or the commit CHANGELOG.md records. */
  foundBy: 'tag' | 'changelog';
}

/** Runs git in `cwd`: whether it succeeded, and its output. Throws only when git itself cannot run. */
export function git(args: string[], cwd = REPO_ROOT, timeoutMs = 60_000): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, timeout: timeoutMs, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', LC_ALL: 'C' } }, (err, stdout, stderr) => {
      if ((err as NodeJS.ErrnoException | null)?.code === 'ENOENT') reject(new Error(`git is not on PATH (needed to find and check out the previous release): ${err!.message}`));
      else resolve({ ok: !err, out: err ? `${stdout}${stderr}`.trim() : stdout.trim() });
    });
  });
}

/**
 * The release before this checkout's version (CHANGELOG.md) and its commit:
 * by its tag `vX.Y.Z` when the clone has it (it must agree with the commit
 * CHANGELOG.md records), else by that commit. Neither reachable (a shallow
 * clone without tags, say) throws, saying what to fetch.
 */
export async function findPreviousRelease(root = REPO_ROOT): Promise<ReleaseRef> {
  const current = currentVersion(root);
  const prev = previousRelease(current, readChangelog(root));
  const tag = `v${prev.version}`;
  const repo = await git(['rev-parse', '--git-dir'], root);
  if (!repo.ok) throw new Error(`${root} is not a git checkout, so the previous release ${prev.version} cannot be checked out from it: ${repo.out}`);
  const byTag = await git(['rev-parse', '--verify', '--quiet', `refs/tags/${tag}^{commit}`], root);
  if (byTag.ok && byTag.out !== '') {
    if (prev.commit !== undefined && byTag.out !== prev.commit) {
      throw new Error(`tag ${tag} is commit ${byTag.out}, but CHANGELOG.md records commit ${prev.commit} for ${prev.version}: correct one of them`);
    }
    return { version: prev.version, commit: byTag.out, foundBy: 'tag' };
  }
  if (prev.commit === undefined) {
    throw new Error(`the previous release ${prev.version} cannot be found: this clone has no tag ${tag} and its CHANGELOG.md section records no commit (a line "Git tag \`${tag}\`, commit \`<40 hex digits>\`.")`);
  }
  const has = await git(['cat-file', '-e', `${prev.commit}^{commit}`], root);
  if (!has.ok) {
    throw new Error(
      `the previous release ${prev.version} is not in this clone: no tag ${tag}, and commit ${prev.commit} (recorded in CHANGELOG.md) is missing` +
        ` (a shallow clone? \`git fetch --tags\`, or \`git fetch --unshallow\`, then run again)`,
    );
  }
  return { version: prev.version, commit: prev.commit, foundBy: 'changelog' };
}
