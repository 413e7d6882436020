import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { TenantKeysData } from '../token/tenant-keys';

const FORMAT = 'v1.';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals key material for the shared cache: AES-256-GCM, the associated data
 * binding the ciphertext to its tenant and state version, so an entry copied
 * to another tenant or given another version in Redis fails to open. `v1.`
 * names the format, as the registry's at-rest format does.
 */
export class KeyCipher {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('KeyCipher needs a 32-byte key');
  }

  seal(tenantId: string, data: TenantKeysData): string {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(aad(tenantId, data.version));
    const body = Buffer.concat([cipher.update(JSON.stringify(data), 'utf8'), cipher.final()]);
    return FORMAT + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64url');
  }

  /** The data, or undefined when the entry was not sealed by this key for this tenant and version. */
  open(tenantId: string, version: number, sealed: string): TenantKeysData | undefined {
    if (!sealed.startsWith(FORMAT)) return undefined;
    const raw = Buffer.from(sealed.slice(FORMAT.length), 'base64url');
    if (raw.length < NONCE_BYTES + TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, NONCE_BYTES));
      decipher.setAAD(aad(tenantId, version));
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
      const data = JSON.parse(plain.toString('utf8')) as TenantKeysData;
      return data.version === version ? data : undefined;
    } catch {
      return undefined;
    }
  }
}

function aad(tenantId: string, version: number): Buffer {
  return Buffer.from(`service-relay:verifier-key-cache:${tenantId}:${version}`, 'utf8');
}
