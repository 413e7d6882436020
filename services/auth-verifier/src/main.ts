import { runService } from '@service-relay/core';
import { loadConfig } from './config';
import { createServer } from './server';

// Run alone (npm start -w services/auth-verifier): config from the environment
// (REDIS_URL required, so tenant changes and messages cross processes).
await runService({ name: 'auth-verifier', loadConfig, createServer });
