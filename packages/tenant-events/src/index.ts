export * from './tenant-event';
export * from './tenant-event-bus';
export * from './memory-tenant-event-bus';
export * from './redis-tenant-event-bus';
export * from './create-tenant-event-bus';
