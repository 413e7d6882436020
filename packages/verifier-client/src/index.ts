export * from './verify-result';
export * from './verifier-client';
export * from './fresh-verdict';
