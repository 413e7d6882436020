import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { tenantDeletionContract } from './tenant-deletion.contract';

tenantDeletionContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});
