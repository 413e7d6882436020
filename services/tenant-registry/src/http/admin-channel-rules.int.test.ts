import { createTestDatabase } from '@service-relay/testkit';
import { channelRulesApiContract } from './admin-channel-rules.contract';

channelRulesApiContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry_rules_api');
  return { env: database.registryEnv, destroy: () => database.drop() };
});
