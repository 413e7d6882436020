import { createTestDatabase } from '@service-relay/testkit';
import { createDb } from '../db/create-db';
import { channelRulesStoreContract } from './channel-rules-store.contract';

channelRulesStoreContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry_rules');
  return {
    open: () => createDb({ kind: 'postgres', url: database.url }),
    destroy: () => database.drop(),
  };
});
