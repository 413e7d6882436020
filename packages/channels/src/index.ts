export * from './channel-name';
export * from './channel-capability';
export * from './channel-rules';
export * from './callback-config';
