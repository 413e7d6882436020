import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from '../logger';
import type { Registry } from 'prom-client';
import type { UsageConfig } from './usage-config';
import { UsageFlusher, type UsageSink } from './usage-flusher';
import { UsageMeter } from './usage-meter';
import { UsageMetrics } from './usage-metrics';

/** What stop() gives the final flush (runMain allows 10 s for the whole stop). */
const FINAL_FLUSH_MS = 1500;
/** Tenant-hours held while the registry does not take flushes (about 100 bytes each). */
const MAX_PENDING_RECORDS = 100_000;

export interface UsageMetering {
  readonly meter: UsageMeter;
  readonly flusher: UsageFlusher;
  readonly instanceId: string;
  start(): void;
  /** The final flush, then the client closes. */
  stop(): Promise<void>;
}

/** Usage metering for this server (#30), or undefined when USAGE_METERING is off or there is no sink. */
export function startUsageMetering(
  config: UsageConfig,
  opts: {
    /** Names the instance in flush ids (realtime, gateway). */
    service: string;
    /** The Prometheus series are `<metricsPrefix>_usage_...` (relay_realtime, gateway). */
    metricsPrefix: string;
    sink: UsageSink | undefined;
    close?: () => void;
    registry: Registry;
    logger: Logger;
  },
): UsageMetering | undefined {
  if (!config.enabled || !opts.sink) return undefined;
  const sink = opts.sink;
  const instanceId = `${opts.service}-${hostname().replace(/[^A-Za-z0-9_.-]/g, '').slice(0, 60)}-${process.pid}-${randomBytes(4).toString('hex')}`;
  const meter = new UsageMeter();
  const metrics = new UsageMetrics(opts.registry, opts.metricsPrefix, config.metricsTenants);
  const flusher = new UsageFlusher({
    meter,
    sink,
    instanceId,
    intervalMs: config.flushIntervalMs,
    maxPendingRecords: MAX_PENDING_RECORDS,
    logger: opts.logger,
    finalDeadlineMs: FINAL_FLUSH_MS,
    onCut: (records) => metrics.cut(records),
    onFlush: (result, n) => {
      metrics.flushed(result, n);
      metrics.backlog.set(flusher.backlog);
    },
  });
  return {
    meter,
    flusher,
    instanceId,
    start: () => flusher.start(),
    async stop() {
      await flusher.stop();
      opts.close?.();
    },
  };
}
