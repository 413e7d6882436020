import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDb } from '../db/create-db';
import { secretsKeyringContract } from './secrets-keyring.contract';

secretsKeyringContract('PGlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'registry-keyring-'));
  return {
    open: () => createDb({ kind: 'pglite', dir }),
    destroy: async () => rmSync(dir, { recursive: true, force: true }),
  };
});
