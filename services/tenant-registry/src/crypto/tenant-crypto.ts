import { HostSyncHasher } from './host-sync-hasher';
import { SecretBox } from '@service-relay/core';

/** Associated data binding a sealed JWT secret to its tenant and key version. */
export function jwtSecretAad(tenantId: string, keyVersion: number): string {
  return `service-relay:jwt-secret:${tenantId}:${keyVersion}`;
}

/** Associated data binding a sealed callback signing secret (#32) to its tenant and secret version. */
export function callbackSecretAad(tenantId: string, secretVersion: number): string {
  return `service-relay:callback-secret:${tenantId}:${secretVersion}`;
}

/** Everything the store does with SECRETS_KEY, in one place. */
export class TenantCrypto {
  private readonly box: SecretBox;
  readonly hostSync: HostSyncHasher;

  constructor(secretsKey: Buffer) {
    this.box = new SecretBox(secretsKey);
    this.hostSync = new HostSyncHasher(secretsKey);
  }

  sealJwtSecret(tenantId: string, keyVersion: number, secret: string): string {
    return this.box.seal(secret, jwtSecretAad(tenantId, keyVersion));
  }

  openJwtSecret(tenantId: string, keyVersion: number, sealed: string): string {
    return this.box.open(sealed, jwtSecretAad(tenantId, keyVersion));
  }

  sealCallbackSecret(tenantId: string, secretVersion: number, secret: string): string {
    return this.box.seal(secret, callbackSecretAad(tenantId, secretVersion));
  }

  openCallbackSecret(tenantId: string, secretVersion: number, sealed: string): string {
    return this.box.open(sealed, callbackSecretAad(tenantId, secretVersion));
  }

  /** A webhook endpoint's signing secret (#32), bound to its endpoint. */
  sealWebhookSecret(endpointId: string, secret: string): string {
    return this.box.seal(secret, `service-relay:webhook-secret:${endpointId}`);
  }

  openWebhookSecret(endpointId: string, sealed: string): string {
    return this.box.open(sealed, `service-relay:webhook-secret:${endpointId}`);
  }
}
