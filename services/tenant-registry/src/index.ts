export { loadConfig, type RegistryConfig, type DatabaseSettings, type LoadConfigOptions } from './config';
export { createServer, type RegistryServer, type RegistryDeps } from './server';
export type { TenantView } from './tenants/tenant';
