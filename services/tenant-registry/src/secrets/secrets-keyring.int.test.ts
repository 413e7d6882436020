import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { secretsKeyringContract } from './secrets-keyring.contract';

secretsKeyringContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});
