import { channelRulesApiContract } from './admin-channel-rules.contract';

// PGlite: the test registry's default database.
channelRulesApiContract('PGlite', async () => ({ env: {}, destroy: async () => {} }));
