import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { tenantStoreContract } from './tenant-store.contract';

tenantStoreContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});
