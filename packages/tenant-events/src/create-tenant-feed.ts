import { monotonicClock, type Clock, type Logger } from '@service-relay/core';
import { RegistryFeedClient } from './registry-feed-client';
import type { TenantEventBus } from './tenant-event-bus';
import { newConsumerId, TenantFeed } from './tenant-feed';

export interface TenantFeedSettings {
  /** auth-verifier, edge-gateway or realtime. */
  kind: string;
  registryAddr: string;
  internalToken: string;
  leaseMs: number;
  bus?: TenantEventBus | undefined;
  /** What the lease is measured on; default monotonicClock (a wall-clock step must not extend a lease). */
  clock?: Clock;
  logger: Logger;
}

/** The feed every consumer service runs: pulls from the registry over gRPC, woken by the bus. */
export function createTenantFeed(s: TenantFeedSettings): TenantFeed {
  const consumerId = newConsumerId(s.kind);
  const source = new RegistryFeedClient({ address: s.registryAddr, internalToken: s.internalToken, consumerId, consumerKind: s.kind });
  return new TenantFeed(s.kind, { source, bus: s.bus, leaseMs: s.leaseMs, clock: s.clock ?? monotonicClock, logger: s.logger.child({ tenant_feed: s.kind }), consumerId });
}
