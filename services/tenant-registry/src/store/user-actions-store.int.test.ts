import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { userActionsStoreContract } from './user-actions-store.contract';

userActionsStoreContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry-users');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});
