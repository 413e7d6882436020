import { runService } from '@service-relay/core';
import { loadConfig } from './config';
import { createServer } from './server';

// Run alone (npm start -w services/realtime): config from the environment
// (REDIS_URL required, so tenant changes and messages cross processes).
await runService({ name: 'realtime', loadConfig, createServer });
