import { Counter, Gauge, type Registry } from 'prom-client';
import type { UsageRecord } from './usage-meter';

export type FlushResult = 'ok' | 'failed' | 'dropped';

/**
 * Usage in Prometheus without a label per tenant: totals over every tenant,
 * and per-tenant series only for the tenants the operator listed in
 * USAGE_METRICS_TENANTS (at most 50). Added at each cut, never per message.
 */
export class UsageMetrics {
  private readonly messages: Counter<'source'>;
  private readonly deliveries: Counter;
  private readonly bytes: Counter<'direction'>;
  private readonly connectionSeconds: Counter;
  private readonly refusals: Counter<'limit'>;
  private readonly tenantMessages: Counter<'tenant_id' | 'source'>;
  private readonly tenantDeliveries: Counter<'tenant_id'>;
  private readonly tenantBytes: Counter<'tenant_id' | 'direction'>;
  private readonly flushes: Counter<'result'>;
  readonly backlog: Gauge;
  private readonly listed: ReadonlySet<string>;

  constructor(registry: Registry, prefix: string, listed: readonly string[]) {
    const registers = [registry];
    this.listed = new Set(listed);
    this.messages = new Counter({ name: `${prefix}_usage_messages_total`, help: 'Metered publishes of every tenant, by source (rest, ws, host)', labelNames: ['source'], registers });
    this.deliveries = new Counter({ name: `${prefix}_usage_deliveries_total`, help: 'Metered message deliveries of every tenant', registers });
    this.bytes = new Counter({ name: `${prefix}_usage_bytes_total`, help: 'Metered bytes of every tenant, by direction (in: data published, out: message frames delivered)', labelNames: ['direction'], registers });
    this.connectionSeconds = new Counter({ name: `${prefix}_usage_connection_seconds_total`, help: 'Metered connection time of every tenant', registers });
    this.refusals = new Counter({ name: `${prefix}_usage_refusals_total`, help: 'Metered refusals of every tenant, by limit', labelNames: ['limit'], registers });
    this.tenantMessages = new Counter({ name: `${prefix}_tenant_usage_messages_total`, help: 'Publishes of the tenants in USAGE_METRICS_TENANTS, by source', labelNames: ['tenant_id', 'source'], registers });
    this.tenantDeliveries = new Counter({ name: `${prefix}_tenant_usage_deliveries_total`, help: 'Deliveries of the tenants in USAGE_METRICS_TENANTS', labelNames: ['tenant_id'], registers });
    this.tenantBytes = new Counter({ name: `${prefix}_tenant_usage_bytes_total`, help: 'Bytes of the tenants in USAGE_METRICS_TENANTS, by direction', labelNames: ['tenant_id', 'direction'], registers });
    this.flushes = new Counter({ name: `${prefix}_usage_flush_records_total`, help: 'Usage records (tenant-hours) by flush result: ok, failed (kept and retried), dropped (over the backlog bound)', labelNames: ['result'], registers });
    this.backlog = new Gauge({ name: `${prefix}_usage_backlog_records`, help: 'Usage records waiting for the registry', registers });
  }

  cut(records: readonly UsageRecord[]): void {
    for (const r of records) {
      this.messages.inc({ source: 'rest' }, r.publishedRest);
      this.messages.inc({ source: 'ws' }, r.publishedWs);
      this.messages.inc({ source: 'host' }, r.publishedHost);
      this.deliveries.inc(r.deliveries);
      this.bytes.inc({ direction: 'in' }, r.bytesIn);
      this.bytes.inc({ direction: 'out' }, r.bytesOut);
      this.connectionSeconds.inc(r.connectionMs / 1000);
      for (const [limit, n] of Object.entries(r.refusals)) this.refusals.inc({ limit }, n);
      if (!this.listed.has(r.tenantId)) continue;
      const tenant_id = r.tenantId;
      this.tenantMessages.inc({ tenant_id, source: 'rest' }, r.publishedRest);
      this.tenantMessages.inc({ tenant_id, source: 'ws' }, r.publishedWs);
      this.tenantMessages.inc({ tenant_id, source: 'host' }, r.publishedHost);
      this.tenantDeliveries.inc({ tenant_id }, r.deliveries);
      this.tenantBytes.inc({ tenant_id, direction: 'in' }, r.bytesIn);
      this.tenantBytes.inc({ tenant_id, direction: 'out' }, r.bytesOut);
    }
  }

  flushed(result: FlushResult, records: number): void {
    this.flushes.inc({ result }, records);
  }
}
