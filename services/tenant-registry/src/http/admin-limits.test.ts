import { limitsApiContract } from './admin-limits.contract';

// PGlite: the test registry's default database.
limitsApiContract('PGlite', async () => ({ env: {}, destroy: async () => {} }));
