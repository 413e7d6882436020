import { createLogger, runMain } from '@service-relay/core';
import { loadConfigFromProcess } from './config';
import { createServer } from './server';

// Wiring only: configuration from the environment, then the server.
await runMain(async () => {
  const config = loadConfigFromProcess({ standalone: true });
  const logger = createLogger({ service: 'realtime', level: config.logLevel });
  const server = createServer(config, { logger });
  await server.start();
  return server;
});
