import { createMetricsRegistry } from '@service-relay/core';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

// Close codes are chosen by clients too; only these become label values, so
// the series stay bounded.
const KNOWN_CLOSE_CODES = new Set([1000, 1001, 1005, 1006, 1008, 1009, 1011, 1013, 4401, 4409]);

/**
 * realtime's Prometheus series. Connections are counted in total and by how
 * many tenants have any, not one series per tenant (unbounded label values).
 */
export interface RealtimeMetrics {
  registry: Registry;
  connections: Gauge;
  connectedTenants: Gauge;
  upgrades: Counter<'result'>;
  messagesIn: Counter<'source'>;
  messagesOut: Counter;
  fanOutLatency: Histogram;
  /** Reconnects and history reads with `after`, by outcome: what an operator alerts on when history is lost. */
  recoveries: Counter<'source' | 'result'>;
  /** Frames and connections refused by a limit (docs/API.md "Limits"), by which one. */
  limitRefusals: Counter<'limit'>;
  /** #30: reconciliations of the cluster-wide tenant publish rate with Redis, by result (ok, error). */
  tenantRateSyncs: Counter<'result'>;
  /** Presence (#13): this instance's member connections, and join/leave events it received for its watchers. */
  presenceMemberships: Gauge;
  presenceEvents: Counter<'type'>;
  /** Errors the message store's Redis connections reported (refused, reset, timed out): what the Redis alert reads. */
  redisErrors: Counter<'connection'>;
  /** Purges of deleted tenants' data (#30) by outcome: done, retrying, failed (left for the next DELETE). */
  tenantPurges: Counter<'outcome'>;
  /** Subscribe/publish callbacks (#32): decisions by action and outcome (allow, deny, unavailable, cached_allow, cached_deny). */
  callbacks: Counter<'action' | 'outcome'>;
  /** How long the host took to answer a callback (timeouts and failures included, at their elapsed time). */
  callbackLatency: Histogram;
  recovery(source: 'ws' | 'rest', r: { recovered: true } | { recovered: false; reason: string }): void;
  closed(code: number): void;
  fannedOut(subscribers: number, publishedAtMs: number): void;
}

export function createRealtimeMetrics(): RealtimeMetrics {
  const registry = createMetricsRegistry('realtime');
  const registers = [registry];
  const recoveries = new Counter({
    name: 'relay_realtime_recoveries_total',
    help: 'Subscribes (ws) and history reads (rest) with after, by result: recovered, history_lost, too_old',
    labelNames: ['source', 'result'],
    registers,
  });
  const messagesOut = new Counter({ name: 'relay_realtime_messages_out_total', help: 'Message frames sent to subscribers (live and replayed)', registers });
  const fanOutLatency = new Histogram({
    name: 'relay_realtime_fanout_latency_seconds',
    help: 'From publish (the message id time, set by the store) to the frame handed to every local subscriber',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const closes = new Counter({ name: 'relay_realtime_closes_total', help: 'Closed WebSocket connections by close code', labelNames: ['code'], registers });
  return {
    registry,
    connections: new Gauge({ name: 'relay_realtime_connections', help: 'Open WebSocket connections', registers }),
    connectedTenants: new Gauge({ name: 'relay_realtime_connected_tenants', help: 'Tenants with at least one open connection', registers }),
    upgrades: new Counter({ name: 'relay_realtime_upgrades_total', help: 'WebSocket upgrade attempts by result', labelNames: ['result'], registers }),
    messagesIn: new Counter({ name: 'relay_realtime_messages_in_total', help: 'Messages published, by source (ws, rest, server: the host server API)', labelNames: ['source'], registers }),
    messagesOut,
    fanOutLatency,
    recoveries,
    tenantRateSyncs: new Counter({ name: 'relay_realtime_tenant_rate_syncs_total', help: 'Tenant publish rate reconciliations with Redis, by result', labelNames: ['result'], registers }),
    limitRefusals: new Counter({
      name: 'relay_realtime_limit_refusals_total',
      help: 'Refused by a limit: publish_rate, auth_frames, subscriptions, payload_size, tenant_connections, tenant_publish_rate, presence_members',
      labelNames: ['limit'],
      registers,
    }),
    presenceMemberships: new Gauge({ name: 'relay_realtime_presence_memberships', help: 'Connections of this instance that are presence members (one per connection and presence channel)', registers }),
    presenceEvents: new Counter({ name: 'relay_realtime_presence_events_total', help: 'Presence join and leave events received for local watchers, by type', labelNames: ['type'], registers }),
    redisErrors: new Counter({
      name: 'relay_realtime_redis_errors_total',
      help: 'Errors reported by the message store\'s Redis connections (commands, subscriber)',
      labelNames: ['connection'],
      registers,
    }),
    tenantPurges: new Counter({ name: 'relay_realtime_tenant_purges_total', help: 'Purges of a deleted tenant\'s data on this instance, by outcome (done, retrying, failed)', labelNames: ['outcome'], registers }),
    callbacks: new Counter({
      name: 'relay_realtime_callbacks_total',
      help: 'Subscribe/publish callback decisions by action and outcome (allow, deny, unavailable: no answer in time or an unreadable one, cached_allow, cached_deny)',
      labelNames: ['action', 'outcome'],
      registers,
    }),
    callbackLatency: new Histogram({
      name: 'relay_realtime_callback_seconds',
      help: 'Time from sending a callback request to its answer (or its failure)',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    recovery: (source, r) => recoveries.inc({ source, result: r.recovered ? 'recovered' : r.reason }),
    closed: (code) => closes.inc({ code: KNOWN_CLOSE_CODES.has(code) ? String(code) : 'other' }),
    fannedOut(subscribers, publishedAtMs) {
      messagesOut.inc(subscribers);
      fanOutLatency.observe(Math.max(0, Date.now() - publishedAtMs) / 1000);
    },
  };
}
