import type * as grpc from '@grpc/grpc-js';
import { isCanonicalUuid, type Logger } from '@service-relay/core';
import { grpcError, hasInternalToken, REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE, serviceDefinition, type GetTenantKeysRequest, type GetTenantKeysResponse } from '@service-relay/grpc';
import type { RegistryMetrics } from '../metrics';
import type { TenantStore } from '../store/tenant-store';

/**
 * relay.registry.v1.KeyService: the only place JWT secrets are decrypted for
 * another service. Callers must present INTERNAL_TOKEN. A disabled tenant's
 * secrets are not handed out at all: nothing may verify with them.
 */
export function addKeyService(server: grpc.Server, store: TenantStore, acceptedTokens: string | readonly string[], metrics: RegistryMetrics, logger: Logger): void {
  server.addService(serviceDefinition(REGISTRY_KEYS_PROTO, REGISTRY_KEYS_SERVICE), {
    GetTenantKeys: (call: grpc.ServerUnaryCall<GetTenantKeysRequest, GetTenantKeysResponse>, callback: grpc.sendUnaryData<GetTenantKeysResponse>) => {
      if (!hasInternalToken(call.metadata, acceptedTokens)) {
        metrics.keyCall('unauthenticated');
        callback(grpcError('invalid_internal_token'));
        return;
      }
      const tenantId = call.request.tenant_id;
      lookup(store, tenantId).then(
        (response) => {
          metrics.keyCall(response.found ? 'found' : 'not_found');
          callback(null, response);
        },
        (err: unknown) => {
          metrics.keyCall('error');
          logger.error({ err, tenant_id: isCanonicalUuid(tenantId) ? tenantId : undefined }, 'GetTenantKeys failed');
          // The verifier fails closed on this; it must not read as "no such tenant".
          callback(grpcError('unavailable'));
        },
      );
    },
  });
}

async function lookup(store: TenantStore, tenantId: string): Promise<GetTenantKeysResponse> {
  // Malformed ids are never issued, so they are simply not found.
  const keys = isCanonicalUuid(tenantId) ? await store.keyAnswer(tenantId) : undefined;
  if (!keys) return { found: false, disabled: false, version: 0, as_of_seq: 0 };
  // Deleted (#30): no such tenant, at the tombstone's version (not older than the `deleted` change verifiers applied).
  if ('deleted' in keys) return { found: false, disabled: false, version: keys.version, as_of_seq: keys.asOfSeq };
  if (keys.disabled) return { found: true, disabled: true, version: keys.version, as_of_seq: keys.asOfSeq };
  const response: GetTenantKeysResponse = {
    found: true,
    disabled: false,
    version: keys.version,
    as_of_seq: keys.asOfSeq,
    primary: { secret: keys.primary.secret, key_version: keys.primary.keyVersion },
  };
  if (keys.previous) response.previous = { secret: keys.previous.secret, key_version: keys.previous.keyVersion };
  if (keys.userRevocations.length > 0) response.user_revocations = keys.userRevocations.map((r) => ({ user_id: r.userId, before: r.before }));
  return response;
}
