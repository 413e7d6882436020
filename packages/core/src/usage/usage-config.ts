import { ConfigError, type EnvReader } from '../config';
import { isCanonicalUuid } from '../ids';

/** Usage metering's settings (#30, docs/OPERATIONS.md "Usage metering"), the same on realtime and the gateway. */
export interface UsageConfig {
  /** USAGE_METERING (default true): count per tenant and flush to the registry. */
  enabled: boolean;
  /** USAGE_FLUSH_INTERVAL_S: how often counts are handed to the registry (what a SIGKILL can lose). */
  flushIntervalMs: number;
  /** USAGE_METRICS_TENANTS: the tenants with their own Prometheus series (at most 50); every other tenant only in the totals. */
  metricsTenants: readonly string[];
}

const MAX_METRICS_TENANTS = 50;

export function readUsageConfig(r: EnvReader): Readonly<UsageConfig> {
  return Object.freeze({
    enabled: r.bool('USAGE_METERING', true),
    flushIntervalMs: r.int('USAGE_FLUSH_INTERVAL_S', 30, 1, 3600) * 1000,
    metricsTenants: Object.freeze(metricsTenants(r)),
  });
}

function metricsTenants(r: EnvReader): string[] {
  const raw = r.raw('USAGE_METRICS_TENANTS');
  if (raw === undefined || raw.trim() === '') return [];
  const ids = [...new Set(raw.split(',').map((s) => s.trim().toLowerCase()))].filter((s) => s !== '');
  if (ids.length > MAX_METRICS_TENANTS || !ids.every((id) => isCanonicalUuid(id))) {
    throw new ConfigError('USAGE_METRICS_TENANTS', `a comma-separated list of at most ${MAX_METRICS_TENANTS} tenant ids`);
  }
  return ids;
}
