import type * as grpc from '@grpc/grpc-js';
import { RelayError } from '@service-relay/core';
import {
  callUnary,
  internalClient,
  internalMetadata,
  REGISTRY_FEED_PROTO,
  REGISTRY_FEED_SERVICE,
  type ChangesSinceRequest,
  type ChangesSinceResponse,
  type UnaryMethod,
} from '@service-relay/grpc';
import { isTenantEventKind, type TenantEvent } from './tenant-event';
import type { ChangeSource, FeedAnswer } from './tenant-feed';

export interface RegistryFeedClientOptions {
  address: string;
  internalToken: string;
  consumerId: string;
  consumerKind: string;
}

/** relay.registry.v1.TenantFeed/ChangesSince with the internal credential. */
export class RegistryFeedClient implements ChangeSource {
  private readonly client: grpc.Client & { ChangesSince: UnaryMethod<ChangesSinceRequest, ChangesSinceResponse> };
  private readonly metadata: grpc.Metadata;

  constructor(private readonly opts: RegistryFeedClientOptions) {
    this.client = internalClient(REGISTRY_FEED_PROTO, REGISTRY_FEED_SERVICE, opts.address, { 'grpc.max_reconnect_backoff_ms': 1_000 });
    this.metadata = internalMetadata(opts.internalToken);
  }

  async changesSince(req: { appliedSeq: number; leaseMs: number; limit: number; deadlineMs: number }): Promise<FeedAnswer> {
    const request: ChangesSinceRequest = {
      consumer_id: this.opts.consumerId,
      consumer_kind: this.opts.consumerKind,
      applied_seq: req.appliedSeq,
      lease_ms: req.leaseMs,
      limit: req.limit,
    };
    const res = await callUnary(this.client.ChangesSince.bind(this.client), request, this.metadata, { deadlineMs: req.deadlineMs, what: 'registry feed' });
    const answer = toAnswer(res);
    if (!answer) throw new RelayError('unavailable', 'registry feed: malformed answer');
    return answer;
  }

  close(): void {
    this.client.close();
  }
}

function toAnswer(res: ChangesSinceResponse): FeedAnswer | undefined {
  const changes: TenantEvent[] = [];
  for (const c of res.changes ?? []) {
    // An unknown kind may be a revocation this build cannot apply: refuse the answer (fail closed) rather than skip it.
    if (!isTenantEventKind(c.kind)) return undefined;
    const event: TenantEvent = { seq: Number(c.seq), tenant_id: c.tenant_id, kind: c.kind, version: Number(c.version), revoked_key_versions: (c.revoked_key_versions ?? []).map(Number) };
    if (c.detail_json) {
      const detail = parseDetail(c.detail_json);
      if (!detail) return undefined;
      event.detail = detail;
    }
    changes.push(event);
  }
  return { latestSeq: Number(res.latest_seq), changes, reset: res.reset };
}

function parseDetail(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
