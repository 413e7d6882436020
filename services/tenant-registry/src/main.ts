import { runMain } from '@service-relay/core';
import { loadConfig, processEnv } from './config';
import { createServer } from './server';

// Alone, the registry needs REDIS_URL so other processes hear its tenant events.
await runMain(async () => {
  const server = createServer(loadConfig(processEnv(), { standalone: true }));
  await server.start();
  return server;
});
