export * from './usage-config';
export * from './usage-meter';
export * from './usage-flusher';
export * from './usage-metrics';
export * from './usage-metering';
