import { runService } from '@service-relay/core';
import { loadConfig } from './config';
import { createServer } from './server';

// Run alone (npm start -w services/edge-gateway): config from the environment
// (REDIS_URL required, so tenant changes and messages cross processes).
await runService({ name: 'edge-gateway', loadConfig, createServer });
