export * from './authorization';
export * from './www-authenticate';
export * from './body-reader';
export * from './request-id';
