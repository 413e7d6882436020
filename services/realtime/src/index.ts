export { loadConfig, type RealtimeConfig } from './config';
export { createServer, type RealtimeDeps, type RealtimeServer } from './server';
export { ManualScheduler, type Scheduler } from './timers/scheduler';
export { MemoryMessageBus } from './messaging/memory-message-bus';
export type { MessageBus } from './messaging/message-bus';
export { RedisMessageBus, type RedisPubSub } from './messaging/redis-message-bus';
