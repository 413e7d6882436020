import { status as GrpcStatus, type Client, type Metadata } from '@grpc/grpc-js';
import type { Logger } from '@service-relay/core';
import type { UsageFlush } from '@service-relay/core';
import { internalClient, type UnaryMethod } from './client';
import { REGISTRY_USAGE_PROTO, REGISTRY_USAGE_SERVICE } from './protos';
import { internalMetadata } from './server';
import { callUnary, grpcStatusOf } from './unary-call';
import type { UsageFlushRequest, UsageFlushResponse } from './usage-wire';

/**
 * relay.registry.v1.Usage/Flush with the internal credential: the registry
 * stores realtime's usage (it owns PostgreSQL). A flush the registry judged
 * malformed would be refused forever: it is dropped, loudly; every other
 * failure rejects (the flusher keeps the flush and sends it again).
 */
export class RegistryUsageClient {
  private readonly client: Client & { Flush: UnaryMethod<UsageFlushRequest, UsageFlushResponse> };
  private readonly metadata: Metadata;

  constructor(private readonly opts: { address: string; internalToken: string; deadlineMs: number; logger: Logger }) {
    this.client = internalClient(REGISTRY_USAGE_PROTO, REGISTRY_USAGE_SERVICE, opts.address, { 'grpc.max_reconnect_backoff_ms': 1_000 });
    this.metadata = internalMetadata(opts.internalToken);
  }

  async flush(flush: UsageFlush): Promise<void> {
    const req: UsageFlushRequest = {
      flush_id: flush.flushId,
      instance_id: flush.instanceId,
      rows: flush.records.map((r) => ({
        tenant_id: r.tenantId,
        hour_ms: r.hourMs,
        published_rest: r.publishedRest,
        published_ws: r.publishedWs,
        published_host: r.publishedHost,
        deliveries: r.deliveries,
        bytes_in: r.bytesIn,
        bytes_out: r.bytesOut,
        peak_connections: r.peakConnections,
        connection_ms: r.connectionMs,
        refusals: Object.entries(r.refusals).map(([limit, count]) => ({ limit, count })),
      })),
    };
    try {
      await callUnary(this.client.Flush.bind(this.client), req, this.metadata, { deadlineMs: this.opts.deadlineMs, what: 'registry usage flush' });
    } catch (err) {
      if (grpcStatusOf(err) !== GrpcStatus.INVALID_ARGUMENT) throw err;
      this.opts.logger.error({ err: (err as Error).message, flush_id: flush.flushId }, 'usage flush refused as malformed; dropped');
    }
  }

  close(): void {
    this.client.close();
  }
}
