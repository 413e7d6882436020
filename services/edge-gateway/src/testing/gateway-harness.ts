import { createLogger, type Clock, type Env } from '@service-relay/core';
import { ManualTenantFeed, MemoryTenantEventBus, type TenantEventBus } from '@service-relay/tenant-events';
import { FakeVerifier } from '@service-relay/testkit';
import { loadConfig, type GatewayConfig } from '../config';
import type { WsHandoff } from '../http/ws-proxy';
import { createServer, type GatewayServer } from '../server';
import { startStubUpstream, type StubUpstream } from './stub-upstream';

export const TEST_INTERNAL_TOKEN = 'internal-token-for-tests-0123456789abcdef';

export interface GatewayHarness {
  url: string;
  /** The ops listener: /readyz and /metrics (the public url answers them 404). */
  opsUrl: string;
  config: GatewayConfig;
  gateway: GatewayServer;
  verifier: FakeVerifier;
  registry: StubUpstream;
  realtime: StubUpstream;
  bus: TenantEventBus | undefined;
  /** The tenant feed, driven by hand: push a change, or take the lease away. */
  feed: ManualTenantFeed;
  /** Every log line the gateway wrote, raw JSON text. */
  logs: string[];
  stop(): Promise<void>;
}

export interface HarnessOptions {
  env?: Env;
  bus?: TenantEventBus;
  feed?: ManualTenantFeed;
  clock?: Clock;
  /** Share one fake verifier (and its stubs) between gateways. */
  verifier?: FakeVerifier;
  registry?: StubUpstream;
  realtime?: StubUpstream;
  /** Realtime's upgrade listener in the same process, as `npm start` passes it. */
  wsHandoff?: WsHandoff;
}

/** A real gateway on port 0 in front of a fake verifier and two stub upstreams. */
export async function startGatewayHarness(opts: HarnessOptions = {}): Promise<GatewayHarness> {
  // Enforces the internal token like the real verifier, so a gateway that does not send it fails every test.
  const verifier = opts.verifier ?? new FakeVerifier({ internalToken: TEST_INTERNAL_TOKEN });
  if (!opts.verifier) await verifier.start();
  const registry = opts.registry ?? (await startStubUpstream());
  const realtime = opts.realtime ?? (await startStubUpstream());
  // Without REDIS_URL the test gets an in-process bus; with it, the gateway builds its Redis bus from config.
  const bus = opts.bus ?? (opts.env?.REDIS_URL ? undefined : new MemoryTenantEventBus());
  const config = loadConfig({
    GATEWAY_PORT: '0',
    GATEWAY_OPS_PORT: '0',
    VERIFIER_ADDR: verifier.address,
    REGISTRY_URL: registry.url,
    REALTIME_URL: realtime.url,
    INTERNAL_TOKEN: TEST_INTERNAL_TOKEN,
    LOG_LEVEL: 'debug',
    ...opts.env,
  });
  const logs: string[] = [];
  const logger = createLogger({ service: 'edge-gateway', level: config.logLevel, destination: { write: (line: string) => void logs.push(line) } });
  const feed = opts.feed ?? new ManualTenantFeed();
  const gateway = createServer(config, { bus, feed, logger, clock: opts.clock, ...(opts.wsHandoff && { wsHandoff: opts.wsHandoff }) });
  await gateway.start();
  return {
    url: `http://127.0.0.1:${gateway.port}`,
    opsUrl: `http://127.0.0.1:${gateway.opsPort}`,
    config,
    gateway,
    verifier,
    registry,
    realtime,
    bus,
    feed,
    logs,
    async stop() {
      await gateway.stop();
      if (!opts.verifier) await verifier.stop();
      if (!opts.registry) await registry.close();
      if (!opts.realtime) await realtime.close();
    },
  };
}
