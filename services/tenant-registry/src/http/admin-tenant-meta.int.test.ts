import { createTestDatabase } from '@service-relay/testkit';
import { tenantMetaApiContract } from './admin-tenant-meta.contract';

tenantMetaApiContract('PostgreSQL', async () => {
  const database = await createTestDatabase('registry_tenant_meta_api');
  return { env: database.registryEnv, destroy: () => database.drop() };
});
