import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { auditStoreContract } from './audit-store.contract';

auditStoreContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry_audit');
  return { db: await createDb({ kind: 'postgres', url: database.url }), destroy: () => database.drop() };
});
