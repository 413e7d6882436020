import { Keyring, LEGACY_KEY_ID } from '@service-relay/core';
import { HostSyncHasher, legacyHostSyncHashKey } from './host-sync-hasher';

/** Associated data binding a sealed JWT secret to its tenant and key version. */
export function jwtSecretAad(tenantId: string, keyVersion: number): string {
  return `service-relay:jwt-secret:${tenantId}:${keyVersion}`;
}

/** Associated data binding a sealed callback signing secret (#32) to its tenant and secret version. */
export function callbackSecretAad(tenantId: string, secretVersion: number): string {
  return `service-relay:callback-secret:${tenantId}:${secretVersion}`;
}

/** Associated data binding a sealed webhook signing secret (#32) to its endpoint. */
export function webhookSecretAad(endpointId: string): string {
  return `service-relay:webhook-secret:${endpointId}`;
}

/** Everything the store does with SECRETS_KEY / SECRETS_KEYS, in one place. */
export class TenantCrypto {
  /** Seals with its sealing key (the database's active key: secrets/keyring-coordinator.ts), opens with any. */
  readonly keyring: Keyring;
  readonly hostSync: HostSyncHasher;

  /**
   * `keys`: the keyring, or one key (SECRETS_KEY alone: the legacy key k0).
   * `hostSyncHashKey`: the host-sync HMAC key; by default derived from k0,
   * as before keyrings.
   */
  constructor(keys: Buffer | Keyring, hostSyncHashKey?: Buffer) {
    this.keyring = Buffer.isBuffer(keys) ? Keyring.legacy(keys) : keys;
    const k0 = this.keyring.key(LEGACY_KEY_ID);
    const hashKey = hostSyncHashKey ?? (k0 && legacyHostSyncHashKey(k0));
    if (!hashKey) throw new Error('TenantCrypto: no host-sync hash key (the keyring has no k0 to derive it from)');
    this.hostSync = new HostSyncHasher(hashKey);
  }

  sealJwtSecret(tenantId: string, keyVersion: number, secret: string): string {
    return this.keyring.seal(secret, jwtSecretAad(tenantId, keyVersion));
  }

  openJwtSecret(tenantId: string, keyVersion: number, sealed: string): string {
    return this.keyring.open(sealed, jwtSecretAad(tenantId, keyVersion));
  }

  sealCallbackSecret(tenantId: string, secretVersion: number, secret: string): string {
    return this.keyring.seal(secret, callbackSecretAad(tenantId, secretVersion));
  }

  openCallbackSecret(tenantId: string, secretVersion: number, sealed: string): string {
    return this.keyring.open(sealed, callbackSecretAad(tenantId, secretVersion));
  }

  /** A webhook endpoint's signing secret (#32), bound to its endpoint. */
  sealWebhookSecret(endpointId: string, secret: string): string {
    return this.keyring.seal(secret, webhookSecretAad(endpointId));
  }

  openWebhookSecret(endpointId: string, sealed: string): string {
    return this.keyring.open(sealed, webhookSecretAad(endpointId));
  }
}
