import type * as grpc from '@grpc/grpc-js';
import type { Logger } from '@service-relay/core';
import { grpcError, hasInternalToken, REGISTRY_USAGE_PROTO, REGISTRY_USAGE_SERVICE, serviceDefinition, type UsageFlushRequest, type UsageFlushResponse } from '@service-relay/grpc';
import type { RegistryMetrics } from '../metrics';
import { UsageStore, type UsageFlush } from '../store/usage-store';

/**
 * relay.registry.v1.Usage: realtime instances hand their usage flushes to the
 * registry, which owns PostgreSQL. Applied once per flush id (a retry of an
 * applied flush answers duplicate); a database failure answers unavailable and
 * the caller keeps the flush and sends it again.
 */
export function addUsageService(server: grpc.Server, store: UsageStore, acceptedTokens: string | readonly string[], metrics: RegistryMetrics, logger: Logger): void {
  server.addService(serviceDefinition(REGISTRY_USAGE_PROTO, REGISTRY_USAGE_SERVICE), {
    Flush: (call: grpc.ServerUnaryCall<UsageFlushRequest, UsageFlushResponse>, callback: grpc.sendUnaryData<UsageFlushResponse>) => {
      if (!hasInternalToken(call.metadata, acceptedTokens)) {
        metrics.usageFlush('unauthenticated');
        callback(grpcError('invalid_internal_token'));
        return;
      }
      const flush = fromWire(call.request);
      const problem = UsageStore.problem(flush);
      if (problem !== undefined) {
        metrics.usageFlush('invalid');
        callback(grpcError('invalid_body', `malformed usage flush: ${problem}`));
        return;
      }
      store.applyFlush(flush).then(
        (result) => {
          metrics.usageFlush(result);
          callback(null, { duplicate: result === 'duplicate' });
        },
        (err: unknown) => {
          metrics.usageFlush('error');
          logger.warn({ err: (err as Error).message, flush_id: flush.flushId }, 'usage flush failed');
          callback(grpcError('unavailable'));
        },
      );
    },
  });
}

function fromWire(r: UsageFlushRequest): UsageFlush {
  return {
    flushId: r.flush_id,
    instanceId: r.instance_id,
    rows: (r.rows ?? []).map((w) => {
      const refusals: Record<string, number> = {};
      for (const x of w.refusals ?? []) refusals[x.limit] = (refusals[x.limit] ?? 0) + Number(x.count);
      return {
        tenantId: w.tenant_id,
        hourMs: Number(w.hour_ms),
        publishedRest: Number(w.published_rest),
        publishedWs: Number(w.published_ws),
        publishedHost: Number(w.published_host),
        deliveries: Number(w.deliveries),
        bytesIn: Number(w.bytes_in),
        bytesOut: Number(w.bytes_out),
        peakConnections: Number(w.peak_connections),
        connectionMs: Number(w.connection_ms),
        refusals,
      };
    }),
  };
}
