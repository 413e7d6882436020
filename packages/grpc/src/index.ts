export * from './protos';
export * from './health';
export * from './server';
