import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDb } from '../db/create-db';
import { auditStoreContract } from './audit-store.contract';

auditStoreContract('PGlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'registry-audit-'));
  return { db: await createDb({ kind: 'pglite', dir }), destroy: async () => rmSync(dir, { recursive: true, force: true }) };
});
