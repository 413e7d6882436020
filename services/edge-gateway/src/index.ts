export { loadConfig, type GatewayConfig, type LoadOptions } from './config';
export { createListener, createServer, type GatewayDeps, type GatewayServer } from './server';
export { createApp, type AppOptions } from './http/create-app';
export { createGatewayMetrics, type GatewayMetrics } from './metrics';
export { MAX_API_BODY_BYTES } from '@service-relay/edge';
export { createUpstreamAgent } from './http/upstream-agent';
