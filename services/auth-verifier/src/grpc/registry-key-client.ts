import * as grpc from '@grpc/grpc-js';
import { RelayError, type Logger } from '@service-relay/core';
import {
  callUnary,
  grpcStatusOf,
  internalClient,
  internalMetadata,
  REGISTRY_KEYS_PROTO,
  REGISTRY_KEYS_SERVICE,
  type GetTenantKeysRequest,
  type GetTenantKeysResponse,
  type SigningKeyMessage,
  type UnaryMethod,
} from '@service-relay/grpc';
import type { TenantKeysData } from '../token/tenant-keys';
import type { KeyFetcher } from '../keys/key-fetcher';

export interface RegistryKeyClientOptions {
  address: string;
  internalToken: string;
  /** A fetch not answered within this is `unavailable`. */
  deadlineMs: number;
  logger: Logger;
}

/** relay.registry.v1.KeyService/GetTenantKeys with the internal credential and a deadline. */
export class RegistryKeyClient implements KeyFetcher {
  private readonly client: grpc.Client & { GetTenantKeys: UnaryMethod<GetTenantKeysRequest, GetTenantKeysResponse> };
  private readonly metadata: grpc.Metadata;

  constructor(private readonly opts: RegistryKeyClientOptions) {
    this.client = internalClient(REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE, opts.address);
    this.metadata = internalMetadata(opts.internalToken);
  }

  async fetch(tenantId: string): Promise<TenantKeysData> {
    let res: GetTenantKeysResponse;
    try {
      res = await callUnary(this.client.GetTenantKeys.bind(this.client), { tenant_id: tenantId }, this.metadata, { deadlineMs: this.opts.deadlineMs, what: 'registry keys' });
    } catch (err) {
      // UNAUTHENTICATED means our INTERNAL_TOKEN is wrong: an operator
      // problem, worth an error line; the rest are outages.
      const code = grpcStatusOf(err);
      const level = code === grpc.status.UNAUTHENTICATED ? 'error' : 'warn';
      this.opts.logger[level]({ code, details: ((err as Error).cause as grpc.ServiceError | undefined)?.details, tenant_id: tenantId }, 'registry key fetch failed');
      throw err;
    }
    const data = toData(res);
    if (!data) {
      this.opts.logger.error({ tenant_id: tenantId }, 'registry answered an enabled tenant without a primary secret');
      throw new RelayError('unavailable', 'registry answer unusable');
    }
    return data;
  }

  ready(): Promise<boolean> {
    return new Promise((resolve) => this.client.waitForReady(Date.now() + 1000, (err?: Error) => resolve(!err)));
  }

  close(): void {
    this.client.close();
  }
}

function toData(res: GetTenantKeysResponse): TenantKeysData | undefined {
  const version = Number(res.version);
  const asOfSeq = Number(res.as_of_seq);
  if (!res.found) return { found: false, disabled: false, version, asOfSeq };
  const key = (k: SigningKeyMessage | null | undefined) => (k && k.secret ? { secret: k.secret, keyVersion: Number(k.key_version) } : undefined);
  const primary = key(res.primary);
  if (!primary && !res.disabled) return undefined;
  const userRevocations = (res.user_revocations ?? []).map((r) => ({ userId: r.user_id.toLowerCase(), before: Number(r.before) }));
  return { found: true, disabled: res.disabled, version, asOfSeq, primary, previous: key(res.previous), ...(userRevocations.length > 0 && { userRevocations }) };
}
