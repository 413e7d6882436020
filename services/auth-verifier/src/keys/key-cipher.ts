import { SecretBox } from '@service-relay/core';
import type { TenantKeysData } from '../token/tenant-keys';

/**
 * Seals key material for the shared cache with the same AEAD format as the
 * registry's secrets at rest; the associated data binds an entry to its
 * tenant and state version, so an entry copied to another tenant or given
 * another version in Redis fails to open.
 */
export class KeyCipher {
  private readonly box: SecretBox;

  constructor(key: Buffer) {
    this.box = new SecretBox(key);
  }

  seal(tenantId: string, data: TenantKeysData): string {
    return this.box.seal(JSON.stringify(data), aad(tenantId, data.version));
  }

  /** The data, or undefined when the entry was not sealed by this key for this tenant and version. */
  open(tenantId: string, version: number, sealed: string): TenantKeysData | undefined {
    try {
      const data = JSON.parse(this.box.open(sealed, aad(tenantId, version))) as TenantKeysData;
      return data.version === version ? data : undefined;
    } catch {
      return undefined;
    }
  }
}

function aad(tenantId: string, version: number): string {
  return `service-relay:verifier-key-cache:${tenantId}:${version}`;
}
