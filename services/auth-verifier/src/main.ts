import { runMain } from '@service-relay/core';
import { loadConfigFromProcess } from './config';
import { createServer } from './server';

// Wiring only: config -> server -> start. Run alone, so REDIS_URL is required.
void runMain(async () => {
  const server = createServer(loadConfigFromProcess({ standalone: true }));
  await server.start();
  return server;
});
