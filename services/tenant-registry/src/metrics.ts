import { createMetricsRegistry } from '@service-relay/core';
import { Counter, Histogram, type Registry } from 'prom-client';

export type FetchResult = 'ok' | 'rejected' | 'rate_limited' | 'error';
export type KeyCallResult = 'found' | 'not_found' | 'unauthenticated' | 'error';
export type FeedCallResult = 'ok' | 'reset' | 'invalid' | 'unauthenticated' | 'error' | 'mirror' | 'mirror_reset';

/** The registry's own Prometheus metrics, on a registry of its own. */
export class RegistryMetrics {
  readonly registry: Registry;
  private readonly adminRequests: Counter<'route' | 'status'>;
  private readonly fetches: Counter<'result'>;
  private readonly hostRequests: Counter<'route' | 'status'>;
  private readonly keyCalls: Counter<'result'>;
  private readonly feedCalls: Counter<'result'>;
  private readonly rulesCalls: Counter<'result'>;
  private readonly propagations: Counter<'result'>;
  private readonly propagationSeconds: Histogram;
  private readonly auditWrites: Counter<'result'>;

  constructor() {
    this.registry = createMetricsRegistry('tenant-registry');
    this.adminRequests = new Counter({
      name: 'relay_registry_admin_requests_total',
      help: 'Admin API requests by route and HTTP status',
      labelNames: ['route', 'status'],
      registers: [this.registry],
    });
    this.fetches = new Counter({
      name: 'relay_registry_host_sync_fetches_total',
      help: 'Host-sync secret fetches by result',
      labelNames: ['result'],
      registers: [this.registry],
    });
    this.hostRequests = new Counter({
      name: 'relay_registry_host_requests_total',
      help: 'Host server API requests (publish, presence, disconnect, revoke_tokens) by route and HTTP status',
      labelNames: ['route', 'status'],
      registers: [this.registry],
    });
    this.keyCalls = new Counter({
      name: 'relay_registry_key_requests_total',
      help: 'GetTenantKeys calls by result',
      labelNames: ['result'],
      registers: [this.registry],
    });
    this.feedCalls = new Counter({
      name: 'relay_registry_feed_requests_total',
      help: 'TenantFeed.ChangesSince calls by result',
      labelNames: ['result'],
      registers: [this.registry],
    });
    this.rulesCalls = new Counter({
      name: 'relay_registry_channel_rules_requests_total',
      help: 'TenantFeed.ChannelRules calls by result',
      labelNames: ['result'],
      registers: [this.registry],
    });
    this.propagations = new Counter({
      name: 'relay_registry_propagations_total',
      help: 'Committed tenant changes by whether they were confirmed in force everywhere within PROPAGATION_TIMEOUT_MS',
      labelNames: ['result'],
      registers: [this.registry],
    });
    this.propagationSeconds = new Histogram({
      name: 'relay_registry_propagation_seconds',
      help: 'Time from commit until a tenant change was confirmed in force on every consumer',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5],
      registers: [this.registry],
    });
    this.auditWrites = new Counter({
      name: 'relay_registry_audit_writes_total',
      help: 'Admin audit rows by result: written, failed (logged; the call answered anyway) or suppressed (failed authentications over the per-minute limit)',
      labelNames: ['result'],
      registers: [this.registry],
    });
  }

  auditWrite(result: 'written' | 'failed' | 'suppressed'): void {
    this.auditWrites.inc({ result });
  }

  feedCall(result: FeedCallResult): void {
    this.feedCalls.inc({ result });
  }

  propagation(confirmed: boolean, seconds: number): void {
    this.propagations.inc({ result: confirmed ? 'confirmed' : 'not_propagated' });
    if (confirmed) this.propagationSeconds.observe(seconds);
  }

  adminRequest(route: string, status: number): void {
    this.adminRequests.inc({ route, status: String(status) });
  }

  fetch(result: FetchResult): void {
    this.fetches.inc({ result });
  }

  hostRequest(route: string, status: number): void {
    this.hostRequests.inc({ route, status: String(status) });
  }

  keyCall(result: KeyCallResult): void {
    this.keyCalls.inc({ result });
  }

  rulesCall(result: KeyCallResult): void {
    this.rulesCalls.inc({ result });
  }
}
