import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, runCommand } from './support/processes';

// #29 item 4: `npm run example` before `npm start` says what to do.
describe('npm run example without a running relay', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it.each(['first run (creates the demo tenant)', 'later run (a saved tenant)'])('%s: exits 1 and says to start the relay with npm start', async (run) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'relay-example-'));
    dirs.push(dataDir);
    if (run.startsWith('later')) {
      writeFileSync(join(dataDir, 'example-chat.json'), JSON.stringify({ tenant_id: '74728c46-6ee6-4f1b-b58c-caf5a171a634', host_sync_client_id: 'hs_0123', host_sync_client_secret: 'x'.repeat(43) }));
    }
    const closed = `http://127.0.0.1:${await freePort()}`;
    const r = await runCommand('npm', ['run', '--silent', 'example'], { DATA_DIR: dataDir, RELAY_URL: closed, REGISTRY_URL: closed, ADMIN_TOKEN: 'x'.repeat(43) });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^chat: cannot reach service-relay \(.+\)\. Is it running\? Start it with `npm start` in another terminal/);
  });
});
