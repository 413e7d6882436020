import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDb } from '../db/create-db';
import { webhookStoreContract } from './webhook-store.contract';

webhookStoreContract('PGlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'registry-webhooks-'));
  return {
    open: () => createDb({ kind: 'pglite', dir }),
    destroy: async () => rmSync(dir, { recursive: true, force: true }),
  };
});
