import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { webhookStoreContract } from './webhook-store.contract';

webhookStoreContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry-webhooks');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});
