import calculateSlot from 'cluster-key-slot';
import { isCluster, type Redis } from './redis';

/**
 * Sharded pub/sub on a Redis Cluster (SSUBSCRIBE/SPUBLISH, Redis 7): a
 * channel lives on the master serving its slot, and ioredis (`createRedis(…,
 * { shardedSubscribers: true })`) keeps one subscriber connection per master.
 * When one of them ends (its node died, the connection was cut), or its node
 * stops serving a slot (a failover, a resharding: Redis then drops the
 * slot's subscriptions with an unsolicited SUNSUBSCRIBE), ioredis rebuilds
 * its subscribers from the slot map and SSUBSCRIBEs again, but says nothing
 * of what was published meanwhile. This reports both moments, from the
 * Cluster client's own events (ioredis 5.11):
 *
 * - `lost(node)`: a sharded subscriber's connection to `node` (`host:port`)
 *   ended or failed, or Redis dropped subscriptions on it; `lost(undefined)`:
 *   ioredis stopped a subscriber (its node serves no slot any more). Both
 *   are reported synchronously, before any replacement can deliver.
 * - `ready()`: ioredis finished rebuilding its subscribers and sent their
 *   SSUBSCRIBEs again (not yet acknowledged); emitted before any message on
 *   the new connections can arrive.
 */
export interface ShardedSubscriberWatch {
  /** The node whose sharded subscriber carries `channel` now, as ioredis routes SSUBSCRIBE; undefined before the slot map is known. */
  nodeOf(channel: string): string | undefined;
  /** True while ioredis keeps a subscriber for `node` that has not ended. */
  live(node: string): boolean;
  stop(): void;
}

interface ShardedInternals {
  shardedSubscribers?: {
    clusterSlots: string[][];
    shardedSubscribers: Map<string, { getInstance(): { status: string; setMaxListeners(n: number): unknown } | null }>;
  };
  refreshSlotsCache?(callback?: (err?: Error) => void): void;
}

export function watchShardedSubscribers(client: Redis, on: { lost(node: string | undefined): void; ready(): void }): ShardedSubscriberWatch {
  const internals = client as unknown as ShardedInternals;
  if (!isCluster(client) || !internals.shardedSubscribers) throw new Error('sharded subscribers need a Cluster client made with shardedSubscribers');
  const group = internals.shardedSubscribers;
  // The Cluster re-emits a sharded subscriber's end as '-node' with its node key (its connection pool's '-node' carries none).
  const onEnd = (_redis: unknown, node?: string) => {
    if (typeof node === 'string') on.lost(node);
  };
  // Only sharded subscribers emit 'nodeError' (the pool's is 'node error'). An unsolicited
  // SUNSUBSCRIBE (the slot left the node) reaches ioredis as a reply nobody asked for:
  // have the slot map read again at once, so ioredis SSUBSCRIBEs on the new owner.
  const onError = (err: Error, node?: string) => {
    if (typeof node === 'string') on.lost(node);
    if (/sunsubscribe/i.test(err?.message ?? '')) internals.refreshSlotsCache?.(() => {});
  };
  const onStopped = () => on.lost(undefined);
  // A new subscriber not yet connected gets one once('ready') per slot with channels from
  // ioredis (to SSUBSCRIBE them then), far past Node's 10-listener warning: they go at 'ready'.
  const onCreated = () => {
    for (const s of group.shardedSubscribers.values()) s.getInstance()?.setMaxListeners(0);
  };
  const onReady = () => on.ready();
  client.on('-node', onEnd);
  client.on('nodeError', onError);
  client.on('-subscriber', onStopped);
  client.on('+subscriber', onCreated);
  client.on('subscribersReady', onReady);
  onCreated();
  return {
    nodeOf: (channel) => group.clusterSlots[calculateSlot(channel)]?.[0],
    live: (node) => {
      const status = group.shardedSubscribers.get(node)?.getInstance()?.status;
      return status !== undefined && status !== 'end' && status !== 'close';
    },
    stop: () => {
      client.off('-node', onEnd);
      client.off('nodeError', onError);
      client.off('-subscriber', onStopped);
      client.off('+subscriber', onCreated);
      client.off('subscribersReady', onReady);
    },
  };
}

/** `channels` grouped by Cluster slot: SSUBSCRIBE and SUNSUBSCRIBE take the channels of one slot per command. */
export function bySlot(channels: Iterable<string>): string[][] {
  const groups = new Map<number, string[]>();
  for (const c of channels) {
    const slot = calculateSlot(c);
    const g = groups.get(slot);
    if (g) g.push(c);
    else groups.set(slot, [c]);
  }
  return [...groups.values()];
}
