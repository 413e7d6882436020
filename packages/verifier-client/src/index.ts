export * from './verify-result';
export * from './verifier-client';
