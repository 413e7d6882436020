import type { FeedStore } from '../store/feed-store';
import type { InstanceLive, RealtimeClient } from '../realtime/realtime-client';

/** Feed consumers heard from within this long are listed. */
const CONSUMERS_WITHIN_MS = 60_000;
const TOP = 20;

/**
 * GET /admin/live (the console's Live page): every realtime instance of
 * REALTIME_URL asked for its connections and busiest channels, and every
 * tenant feed consumer's position from the registry's own table. Counts
 * only; no user id, token or message.
 */
export class AdminLive {
  constructor(
    private readonly feed: Pick<FeedStore, 'consumers' | 'latestSeq'>,
    private readonly realtime: Pick<RealtimeClient, 'live'>,
  ) {}

  async read(): Promise<Record<string, unknown>> {
    const [instances, consumers, seq] = await Promise.all([this.realtime.live(), this.feed.consumers(CONSUMERS_WITHIN_MS), this.feed.latestSeq()]);
    return {
      at: new Date().toISOString(),
      instances: instances.map(instanceView),
      tenants: sumTenants(instances),
      channels: mergeChannels(instances),
      feed: {
        latest_seq: seq,
        consumers: consumers.map((c) => ({ consumer_id: c.consumerId, kind: c.kind, applied_seq: c.appliedSeq, behind: Math.max(0, seq - c.appliedSeq), current: c.current, seen_ms_ago: c.lagMs })),
      },
    };
  }
}

function instanceView(i: InstanceLive): Record<string, unknown> {
  if ('error' in i) return { address: i.address, error: i.error };
  const s = i.snapshot;
  return { address: i.address, instance_id: s.instance_id, feed_current: s.feed_current, connections: s.connections, channels_open: s.channels_open, tenants: s.tenants.length };
}

/** Connections per tenant over every instance that answered, most first. */
function sumTenants(instances: InstanceLive[]): Array<{ tenant_id: string; connections: number }> {
  const sums = new Map<string, number>();
  for (const i of instances) if ('snapshot' in i) for (const t of i.snapshot.tenants) sums.set(t.tenant_id, (sums.get(t.tenant_id) ?? 0) + t.connections);
  return [...sums].map(([tenant_id, connections]) => ({ tenant_id, connections })).sort((a, b) => b.connections - a.connections || a.tenant_id.localeCompare(b.tenant_id));
}

/** Subscribers summed per channel; presence is cluster-wide already, so the largest count seen. */
function mergeChannels(instances: InstanceLive[]): Array<{ tenant_id: string; channel: string; subscribers: number; presence: number | null }> {
  const merged = new Map<string, { tenant_id: string; channel: string; subscribers: number; presence: number | null }>();
  for (const i of instances) {
    if (!('snapshot' in i)) continue;
    for (const c of i.snapshot.channels) {
      const key = JSON.stringify([c.tenant_id, c.channel]);
      const m = merged.get(key);
      if (!m) merged.set(key, { ...c });
      else {
        m.subscribers += c.subscribers;
        m.presence = c.presence === null ? m.presence : Math.max(m.presence ?? 0, c.presence);
      }
    }
  }
  return [...merged.values()].sort((a, b) => b.subscribers - a.subscribers).slice(0, TOP);
}
