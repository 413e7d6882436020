import { tenantMetaApiContract } from './admin-tenant-meta.contract';

// PGlite: the test registry's default database.
tenantMetaApiContract('PGlite', async () => ({ env: {}, destroy: async () => {} }));
