import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { usageStoreContract } from './usage-store.contract';

usageStoreContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry-usage');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});
