import { createMetricsRegistry } from '@service-relay/core';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { WebhookSenderMetrics } from './webhooks/webhook-sender';

export type FetchResult = 'ok' | 'rejected' | 'rate_limited' | 'error';
export type KeyCallResult = 'found' | 'not_found' | 'unauthenticated' | 'error';
export type FeedCallResult = 'ok' | 'reset' | 'invalid' | 'unauthenticated' | 'error' | 'mirror' | 'mirror_reset';

/** The registry's own Prometheus metrics, on a registry of its own. */
export interface RegistryMetrics {
  registry: Registry;
  auditWrite(result: 'written' | 'failed' | 'suppressed'): void;
  feedCall(result: FeedCallResult): void;
  propagation(confirmed: boolean, seconds: number): void;
  adminRequest(route: string, status: number): void;
  fetch(result: FetchResult): void;
  hostRequest(route: string, status: number): void;
  keyCall(result: KeyCallResult): void;
  rulesCall(result: KeyCallResult): void;
  /** Usage.Flush calls (#30) by result: applied, duplicate, invalid, unauthenticated, error. */
  usageFlush(result: 'applied' | 'duplicate' | 'invalid' | 'unauthenticated' | 'error'): void;
  /** The webhook sender (#32). */
  webhooks: WebhookSenderMetrics;
}

export function createRegistryMetrics(): RegistryMetrics {
  const registry = createMetricsRegistry('tenant-registry');
  const registers = [registry];
  const adminRequests = new Counter({ name: 'relay_registry_admin_requests_total', help: 'Admin API requests by route and HTTP status', labelNames: ['route', 'status'], registers });
  const fetches = new Counter({ name: 'relay_registry_host_sync_fetches_total', help: 'Host-sync secret fetches by result', labelNames: ['result'], registers });
  const hostRequests = new Counter({
    name: 'relay_registry_host_requests_total',
    help: 'Host server API requests (publish, presence, disconnect, revoke_tokens) by route and HTTP status',
    labelNames: ['route', 'status'],
    registers,
  });
  const keyCalls = new Counter({ name: 'relay_registry_key_requests_total', help: 'GetTenantKeys calls by result', labelNames: ['result'], registers });
  const feedCalls = new Counter({ name: 'relay_registry_feed_requests_total', help: 'TenantFeed.ChangesSince calls by result', labelNames: ['result'], registers });
  const rulesCalls = new Counter({ name: 'relay_registry_channel_rules_requests_total', help: 'TenantFeed.ChannelRules calls by result', labelNames: ['result'], registers });
  const usageFlushes = new Counter({ name: 'relay_registry_usage_flushes_total', help: 'Usage.Flush calls by result (duplicate: a retried flush applied before)', labelNames: ['result'], registers });
  const propagations = new Counter({
    name: 'relay_registry_propagations_total',
    help: 'Committed tenant changes by whether they were confirmed in force everywhere within PROPAGATION_TIMEOUT_MS',
    labelNames: ['result'],
    registers,
  });
  const propagationSeconds = new Histogram({
    name: 'relay_registry_propagation_seconds',
    help: 'Time from commit until a tenant change was confirmed in force on every consumer',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5],
    registers,
  });
  const auditWrites = new Counter({
    name: 'relay_registry_audit_writes_total',
    help: 'Admin audit rows by result: written, failed (logged; the call answered anyway) or suppressed (failed authentications over the per-minute limit)',
    labelNames: ['result'],
    registers,
  });
  const webhookRequests = new Histogram({
    name: 'relay_registry_webhook_request_seconds',
    help: 'Webhook requests to tenant endpoints by result (ok, http_error, timeout, network) and their latency',
    labelNames: ['result'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const webhookEvents = new Counter({
    name: 'relay_registry_webhook_events_total',
    help: 'Webhook events by outcome: delivered (per endpoint), expired (given up after WEBHOOK_RETRY_FOR_S), unrouted (no endpoint wanted it)',
    labelNames: ['result'],
    registers,
  });
  const webhookQueued = new Gauge({ name: 'relay_registry_webhook_queued_events', help: 'Webhook events stored and not yet delivered, over every endpoint (the sender updates it)', registers });
  const webhookFailing = new Gauge({ name: 'relay_registry_webhook_endpoints_failing', help: 'Enabled webhook endpoints whose last attempt failed (the sender updates it)', registers });
  return {
    registry,
    webhooks: {
      request: (result, seconds) => webhookRequests.observe({ result }, seconds),
      events: (result, n) => webhookEvents.inc({ result }, n),
      backlog(queued, failing) {
        webhookQueued.set(queued);
        webhookFailing.set(failing);
      },
    },
    auditWrite: (result) => auditWrites.inc({ result }),
    feedCall: (result) => feedCalls.inc({ result }),
    propagation(confirmed, seconds) {
      propagations.inc({ result: confirmed ? 'confirmed' : 'not_propagated' });
      if (confirmed) propagationSeconds.observe(seconds);
    },
    adminRequest: (route, status) => adminRequests.inc({ route, status: String(status) }),
    fetch: (result) => fetches.inc({ result }),
    hostRequest: (route, status) => hostRequests.inc({ route, status: String(status) }),
    keyCall: (result) => keyCalls.inc({ result }),
    rulesCall: (result) => rulesCalls.inc({ result }),
    usageFlush: (result) => usageFlushes.inc({ result }),
  };
}
