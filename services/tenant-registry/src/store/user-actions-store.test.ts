import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDb } from '../db/create-db';
import { userActionsStoreContract } from './user-actions-store.contract';

userActionsStoreContract('PGlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'registry-users-'));
  return {
    open: () => createDb({ kind: 'pglite', dir }),
    destroy: async () => rmSync(dir, { recursive: true, force: true }),
  };
});
