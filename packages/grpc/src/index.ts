export * from './protos';
export * from './client';
export * from './health';
export * from './server';
export * from './registry-keys-wire';
export * from './verifier-wire';
export * from './verify-result-wire';
export * from './unary-call';
