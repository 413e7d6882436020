import type { Agent, Server } from 'node:http';
import { createLogger, DEFAULT_CONNECTION_LIMITS, listen } from '@service-relay/core';
import { createApp, createGatewayMetrics, createListener, createUpstreamAgent, type GatewayConfig } from '@service-relay/edge-gateway';
import type { VerifyResult } from '@service-relay/verifier-client';
import { serveWorker } from '../lib/worker-runtime';

/**
 * The gateway_auth_ratio baseline: the gateway's own app, built by its own
 * createApp() with the same agent, metrics and forwarder as server.ts builds,
 * served by the same listener (createListener), but without the auth step
 * (createApp's bench-only switch; no configuration variable reaches it).
 *
 * `authenticate: false` forwards no identity, and the upstream's /api/v1/me
 * then does different work (it refuses the request). So by default the auth
 * step is replaced by a constant verdict instead — same headers upstream,
 * same upstream work, zero auth cost — which is what "auth switched off"
 * should cost. `mode: 'off'` uses the switch as is.
 */

interface StartArgs {
  realtimeUrl: string;
  registryUrl: string;
  internalToken: string;
  mode: 'constant' | 'off';
  identity: { tenantId: string; userId: string; expiresAt: number };
}

let server: Server | undefined;
let agent: Agent | undefined;

async function start(args: StartArgs): Promise<{ port: number }> {
  const logger = createLogger({ service: 'bench-gateway-noauth', level: 'warn' });
  const config: Pick<GatewayConfig, 'registryUrl' | 'realtimeUrl' | 'internalToken' | 'corsOrigins' | 'upstreamTimeoutMs' | 'trustProxy'> = {
    registryUrl: args.registryUrl,
    realtimeUrl: args.realtimeUrl,
    internalToken: args.internalToken,
    corsOrigins: [],
    upstreamTimeoutMs: 10_000,
    trustProxy: false,
  };
  agent = createUpstreamAgent();
  const verdict: VerifyResult = { valid: true, identity: { ...args.identity, keySlot: 'primary', keyVersion: 1 } };
  const constant = { check: () => verdict };
  const app = createApp({
    config,
    logger,
    metrics: createGatewayMetrics(),
    readiness: {},
    agent,
    ...(args.mode === 'off' ? { authenticate: false } : { authenticator: constant }),
  });
  // The gateway's own listener (connection guard included), with the bench stack's per-address cap.
  server = createListener(app, { maxRequestHeaders: 100, connectionLimits: { ...DEFAULT_CONNECTION_LIMITS, maxPerAddress: 19_000 } }, logger);
  return { port: await listen(server, 0, '127.0.0.1') };
}

serveWorker({ start }, () => {
  agent?.destroy();
  server?.closeAllConnections();
  server?.close();
});
