export * from './webhook-event';
export * from './in-process-webhook-events';
