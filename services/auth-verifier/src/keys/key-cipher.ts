import { Keyring, sealedKeyId } from '@service-relay/core';
import type { TenantKeysData } from '../token/tenant-keys';

/**
 * Seals key material for the shared cache with the same AEAD format as the
 * registry's secrets at rest; the associated data binds an entry to its
 * tenant and state version, so an entry copied to another tenant or given
 * another version in Redis fails to open. With SECRETS_KEYS, entries are
 * sealed under the newest key (derived) and open under any.
 */
export class KeyCipher {
  private readonly keyring: Keyring;

  /** One key (the legacy single SECRETS_KEY's derivation), or a keyring of derived keys. */
  constructor(keys: Buffer | Keyring) {
    this.keyring = Buffer.isBuffer(keys) ? Keyring.legacy(keys) : keys;
  }

  seal(tenantId: string, data: TenantKeysData): string {
    return this.keyring.seal(JSON.stringify(data), aad(tenantId, data.version));
  }

  /** The data, or undefined when the entry was not sealed by these keys for this tenant and version. */
  open(tenantId: string, version: number, sealed: string): TenantKeysData | undefined {
    try {
      const data = JSON.parse(this.keyring.open(sealed, aad(tenantId, version))) as TenantKeysData;
      return data.version === version ? data : undefined;
    } catch {
      return undefined;
    }
  }

  /** The entry names a key id this verifier does not have (another verifier's newer or older key during a rotation). */
  otherKey(sealed: string): boolean {
    const id = sealedKeyId(sealed);
    return id !== undefined && !this.keyring.has(id);
  }
}

function aad(tenantId: string, version: number): string {
  return `service-relay:verifier-key-cache:${tenantId}:${version}`;
}
