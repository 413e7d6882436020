import { createMetricsRegistry } from '@service-relay/core';
import { Counter, type Registry } from 'prom-client';

export type FetchResult = 'ok' | 'rejected' | 'error';
export type KeyCallResult = 'found' | 'not_found' | 'unauthenticated' | 'error';

/** The registry's own Prometheus metrics, on a registry of its own. */
export class RegistryMetrics {
  readonly registry: Registry;
  private readonly adminRequests: Counter<'route' | 'status'>;
  private readonly fetches: Counter<'result'>;
  private readonly keyCalls: Counter<'result'>;

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
    this.keyCalls = new Counter({
      name: 'relay_registry_key_requests_total',
      help: 'GetTenantKeys calls by result',
      labelNames: ['result'],
      registers: [this.registry],
    });
  }

  adminRequest(route: string, status: number): void {
    this.adminRequests.inc({ route, status: String(status) });
  }

  fetch(result: FetchResult): void {
    this.fetches.inc({ result });
  }

  keyCall(result: KeyCallResult): void {
    this.keyCalls.inc({ result });
  }
}
