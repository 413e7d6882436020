import { runService } from '@service-relay/core';
import { ManualTenantFeed } from '@service-relay/tenant-events';
import { loadConfig } from '../config';
import { createServer } from '../server';
import { MemoryRulesSource } from './memory-rules-source';

// A realtime instance as a process of its own, for tests that must kill one
// (SIGKILL leaves no chance to clean up): configuration from the environment
// like main.ts, but no registry behind it (a tenant feed that is always
// current, every tenant with the default channel rules). The test passes
// VERIFIER_ADDR of its FakeVerifier, REDIS_URL, REDIS_PREFIX and REALTIME_PORT.
await runService({
  name: 'realtime',
  loadConfig,
  createServer: (config, deps) => createServer(config, { ...deps, feed: new ManualTenantFeed(), channelRules: new MemoryRulesSource() }),
});
