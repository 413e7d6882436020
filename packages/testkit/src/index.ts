export * from './backends';
export * from './token-forge';
export * from './fake-verifier';
export * from './raw-http';
export * from './contract-answer';
export * from './free-port';
