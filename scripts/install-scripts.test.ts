import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

// #29 item 4: `npm ci` (npm 11) warns about every dependency whose install
// scripts package.json's `allowScripts` does not cover; a newcomer must not
// have to wonder about it. Every such package is declared (approved or not).
describe('allowScripts covers every dependency with install scripts', () => {
  it('npm install-scripts ls lists none', async () => {
    const out = await new Promise<string>((resolve, reject) =>
      execFile('npm', ['install-scripts', 'ls', '--json'], { cwd: ROOT, timeout: 60_000 }, (err, stdout) => (err ? reject(err) : resolve(stdout))),
    );
    expect(JSON.parse(out)).toEqual({ allowScripts: [] });
  });
});
