import { createLogger, runMain } from '@service-relay/core';
import { loadConfig } from './config';
import { createServer } from './server';

// Started alone (npm start -w services/edge-gateway): configuration from the
// environment, REDIS_URL required so events and rate limits cross processes.
await runMain(async () => {
  const config = loadConfig(undefined, { standalone: true });
  const logger = createLogger({ service: 'edge-gateway', level: config.logLevel });
  const server = createServer(config, { logger });
  await server.start();
  return server;
});
