import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { REPO_ROOT } from '../support/processes';
import { compareVersions, currentVersion, findPreviousRelease, git, parseChangelog, previousRelease, readChangelog } from '../support/releases';
import { renderKustomization, repoDir } from './kustomize';

// Releases (CHANGELOG.md, docs/OPERATIONS.md "Upgrading from one release to
// the next"): one version across the root and every private workspace and
// the example overlays' image tags; every earlier release findable without
// its tag; the lookup the version-skew upgrade test uses; and migrations
// that only expand, so the previous release keeps working on the schema.

const version = currentVersion();
const releases = readChangelog();

function workspaceManifests(): string[] {
  return ['packages', 'services']
    .flatMap((d) => readdirSync(join(REPO_ROOT, d)).map((x) => `${d}/${x}/package.json`))
    .concat(['bench/package.json', 'examples/chat/package.json'])
    .filter((f) => {
      try {
        readFileSync(join(REPO_ROOT, f));
        return true;
      } catch {
        return false;
      }
    });
}

describe('releases', () => {
  it('the root, every private workspace and the example overlays\u2019 image tags carry the version CHANGELOG.md releases', () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    const off: string[] = [];
    for (const f of workspaceManifests()) {
      const p = JSON.parse(readFileSync(join(REPO_ROOT, f), 'utf8')) as { version: string; private?: boolean };
      // The published SDKs (not private) version on their own, with their own changelogs.
      if (p.private && p.version !== version) off.push(`${f} ${p.version}`);
    }
    const overlays = join(REPO_ROOT, 'deploy/kubernetes/overlays');
    for (const o of readdirSync(overlays)) {
      let k: { images?: Array<{ name: string; newTag?: string }> };
      try {
        k = parse(readFileSync(join(overlays, o, 'kustomization.yaml'), 'utf8')) as typeof k;
      } catch {
        continue;
      }
      for (const img of k.images ?? []) if (img.newTag !== undefined && img.newTag !== version) off.push(`overlays/${o} ${img.name}:${img.newTag}`);
    }
    expect(off, `not at ${version}`).toEqual([]);
    expect(releases.map((r) => r.version), 'CHANGELOG.md: a section per release, newest first, the first this version').toEqual([...releases.map((r) => r.version)].sort((a, b) => compareVersions(b, a)));
    expect(releases[0]?.version).toBe(version);
  });

  it('every release before this one records its commit in CHANGELOG.md, and its tag (when this clone has it) agrees', async () => {
    const older = releases.filter((r) => compareVersions(r.version, version) < 0);
    expect(older.length).toBeGreaterThan(0);
    for (const r of older) {
      expect(r.commit, `CHANGELOG.md [${r.version}]: "Git tag \`v${r.version}\`, commit \`<40 hex>\`."`).toMatch(/^[0-9a-f]{40}$/);
      const tag = await git(['rev-parse', '--verify', '--quiet', `refs/tags/v${r.version}^{commit}`]);
      if (tag.ok && tag.out !== '') expect(tag.out, `tag v${r.version}`).toBe(r.commit);
    }
  });

  it('an upgrade applies one service at a time: `-l app.kubernetes.io/name=<service>` selects its Deployment, Service, PodDisruptionBudget and autoscaler, and nothing shared', () => {
    const objects = renderKustomization(repoDir('deploy/kubernetes/overlays/example'));
    for (const service of ['tenant-registry', 'auth-verifier', 'edge-gateway', 'realtime']) {
      const selected = objects.filter((o) => (o.metadata.labels as Record<string, string> | undefined)?.['app.kubernetes.io/name'] === service).map((o) => `${o.kind}/${o.metadata.name}`);
      expect(selected.sort(), `docs/OPERATIONS.md "Upgrading from one release to the next": kubectl apply -l app.kubernetes.io/name=${service}`).toEqual(
        ['Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'Service'].map((k) => `${k}/${service}`),
      );
    }
  });

  describe('finding the previous release (the version-skew upgrade test\u2019s lookup)', () => {
    const dirs: string[] = [];
    afterAll(() => {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });
    const changelog = (commit?: string) => `# Changelog\n\n## [Unreleased]\n\n## [0.3.0] - 2026-12-01\n\nGit tag \`v0.3.0\`.\n\n## [0.2.0] - 2026-11-28\n\n${commit ? `Git tag \`v0.2.0\`, commit \`${commit}\`.\n` : 'Git tag `v0.2.0`.\n'}\n## [0.1.0] - 2026-11-01\n`;
    /** A repository whose first commit is "0.2.0" and whose second is "0.3.0" with the given changelog. */
    async function repo(opts: { tag?: boolean; record?: 'right' | 'missing' }): Promise<{ dir: string; released: string }> {
      const dir = mkdtempSync(join(tmpdir(), 'relay-releases-'));
      dirs.push(dir);
      const run = async (args: string[]) => {
        const r = await git(['-c', 'user.name=t', '-c', 'user.email=t@example.com', '-c', 'commit.gpgsign=false', '-c', 'tag.gpgsign=false', ...args], dir);
        if (!r.ok) throw new Error(`git ${args.join(' ')}: ${r.out}`);
        return r.out;
      };
      await run(['init', '-q']);
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ version: '0.2.0' }));
      await run(['add', '-A']);
      await run(['commit', '-q', '-m', '0.2.0']);
      const released = await run(['rev-parse', 'HEAD']);
      if (opts.tag) await run(['tag', '-a', 'v0.2.0', '-m', '0.2.0']);
      const recorded = opts.record === 'right' ? released : opts.record === 'missing' ? '0123456789abcdef0123456789abcdef01234567' : undefined;
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ version: '0.3.0' }));
      writeFileSync(join(dir, 'CHANGELOG.md'), changelog(recorded));
      await run(['add', '-A']);
      await run(['commit', '-q', '-m', '0.3.0']);
      return { dir, released };
    }

    it('parses the sections and picks the newest release before the current version', () => {
      const parsed = parseChangelog(changelog('a'.repeat(40)));
      expect(parsed).toEqual([
        { version: '0.3.0', date: '2026-12-01', commit: undefined },
        { version: '0.2.0', date: '2026-11-28', commit: 'a'.repeat(40) },
        { version: '0.1.0', date: '2026-11-01', commit: undefined },
      ]);
      expect(previousRelease('0.3.0', parsed).version).toBe('0.2.0');
      expect(() => previousRelease('0.4.0', parsed)).toThrow('CHANGELOG.md has no "## [0.4.0]" section');
      expect(() => previousRelease('0.1.0', parsed)).toThrow('names no release before 0.1.0');
      expect(compareVersions('0.10.0', '0.9.1')).toBeGreaterThan(0);
    });

    it('by its tag when the clone has it, else by the commit CHANGELOG.md records', async () => {
      const tagged = await repo({ tag: true, record: 'right' });
      expect(await findPreviousRelease(tagged.dir)).toEqual({ version: '0.2.0', commit: tagged.released, foundBy: 'tag' });
      const untagged = await repo({ record: 'right' });
      expect(await findPreviousRelease(untagged.dir)).toEqual({ version: '0.2.0', commit: untagged.released, foundBy: 'changelog' });
      const tagOnly = await repo({ tag: true });
      expect(await findPreviousRelease(tagOnly.dir)).toEqual({ version: '0.2.0', commit: tagOnly.released, foundBy: 'tag' });
    });

    it('fails, saying what is missing, when neither is reachable or they disagree', async () => {
      await expect(findPreviousRelease((await repo({ record: 'missing' })).dir)).rejects.toThrow(
        'the previous release 0.2.0 is not in this clone: no tag v0.2.0, and commit 0123456789abcdef0123456789abcdef01234567 (recorded in CHANGELOG.md) is missing (a shallow clone? `git fetch --tags`, or `git fetch --unshallow`, then run again)',
      );
      await expect(findPreviousRelease((await repo({})).dir)).rejects.toThrow('this clone has no tag v0.2.0 and its CHANGELOG.md section records no commit');
      await expect(findPreviousRelease((await repo({ tag: true, record: 'missing' })).dir)).rejects.toThrow(/tag v0\.2\.0 is commit [0-9a-f]{40}, but CHANGELOG\.md records commit 0123456789abcdef/);
    });
  });

  it('migrations only expand: no drop, rename, type change, new NOT NULL without a default or new constraint, but the ones reviewed below', () => {
    // Reviewed against the code of every release that may run beside them (docs/OPERATIONS.md
    // "Upgrading from one release to the next"). Both predate 0.1.0; 0.1.0's code was written for them.
    const reviewed: Record<string, string> = {
      // Tombstones (deleted_at) are new with this migration, and only a registry that deletes writes one.
      '008_tenant_delete.sql': 'constraints on tombstones, which older code never writes',
      // The tombstone constraint extended to the new column, which older code never sets (it stays NULL).
      '012_host_sync_previous.sql': 'the tombstone constraint extended to a column older code leaves NULL',
    };
    const contracting: Array<[RegExp, string]> = [
      [/\bDROP\s+(TABLE|COLUMN|INDEX|CONSTRAINT|TYPE|VIEW|FUNCTION|DEFAULT)\b/i, 'drops'],
      [/\bRENAME\b/i, 'renames'],
      [/\bALTER\s+COLUMN\s+\S+\s+(SET\s+DATA\s+)?TYPE\b/i, 'changes a type'],
      [/\bSET\s+NOT\s+NULL\b/i, 'makes a column NOT NULL'],
      [/\bADD\s+CONSTRAINT\b/i, 'adds a constraint'],
      [/\bCREATE\s+UNIQUE\s+INDEX\b/i, 'adds a unique index'],
      [/\bADD\s+COLUMN\b(?:(?!\bDEFAULT\b)[^,;])*\bNOT\s+NULL\b(?:(?!\bDEFAULT\b)[^,;])*[,;]/i, 'adds a NOT NULL column without a default'],
    ];
    const dir = join(REPO_ROOT, 'services/tenant-registry/migrations');
    const found: string[] = [];
    for (const f of readdirSync(dir).filter((x) => x.endsWith('.sql')).sort()) {
      const sql = readFileSync(join(dir, f), 'utf8').replace(/--[^\n]*/g, '');
      for (const [re, what] of contracting) if (re.test(sql) && !(f in reviewed)) found.push(`${f} ${what}`);
    }
    expect(found, 'a migration older code would break on: split it (expand now, contract a release later) or review it here').toEqual([]);
  });
});
