import type { Agent, Server } from 'node:http';
import { createLogger, listen, pinTickObjectShape } from '@service-relay/core';
import { capabilityFromJson } from '@service-relay/channels';
import { DEFAULT_CONNECTION_LIMITS } from '@service-relay/edge';
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
 * step is replaced by verdicts prepared before the runs, one per token the
 * load sends, each with that token's own user (a Map lookup per request) —
 * same headers upstream, same upstream work, zero auth cost — which is what
 * "auth switched off" should cost. The one constant identity this baseline
 * forwarded before (one user instead of the load's 1,000) measured 3–5 CPU-µs
 * per request cheaper than this in the same runs (bench/README.md
 * "Steady-state connects, per-user no-auth baseline: the Intel Xeon table").
 * `mode: 'off'` uses the switch as is.
 */

interface StartArgs {
  realtimeUrl: string;
  registryUrl: string;
  internalToken: string;
  mode: 'prepared' | 'off';
  /** The tokens the load will send (the bench's own, for one tenant): their verdicts are prepared from their claims. */
  tokens: string[];
}

/** The verdict the verifier gives a bench token, read from its claims (its signature is the bench's own). */
function preparedVerdict(token: string): VerifyResult {
  const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as { tenant_id: string; user_id: string; exp: number; iat: number; cap?: unknown };
  const cap = claims.cap === undefined ? undefined : capabilityFromJson(JSON.stringify(claims.cap));
  return {
    valid: true,
    identity: { tenantId: claims.tenant_id, userId: claims.user_id, expiresAt: claims.exp, issuedAt: claims.iat, keySlot: 'primary', keyVersion: 1, ...(cap !== undefined && { cap }) },
  };
}

let server: Server | undefined;
let agent: Agent | undefined;

async function start(args: StartArgs): Promise<{ port: number }> {
  // As the real gateway's process does (runMain; service-host.ts in the bench): the two processes differ by the auth step only.
  pinTickObjectShape();
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
  const verdicts = new Map(args.tokens.map((t) => [t, preparedVerdict(t)]));
  const refused: VerifyResult = { valid: false, reason: 'not a bench token' };
  const prepared = { check: (token: string) => verdicts.get(token) ?? refused };
  const app = createApp({
    config,
    logger,
    metrics: createGatewayMetrics(),
    agent,
    ...(args.mode === 'off' ? { authenticate: false } : { authenticator: prepared }),
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
