import { createTestDatabase } from '@service-relay/testkit';
import { limitsApiContract } from './admin-limits.contract';

limitsApiContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry_limits_api');
  return { env: database.registryEnv, destroy: () => database.drop() };
});
