import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const HKDF_INFO = 'service-relay:host-sync-hash';

/**
 * The host-sync hash key of a deployment that has only ever had SECRETS_KEY:
 * HKDF-SHA256 of that key (k0). Once another key seals, the registry stores
 * this same value sealed in the database (secrets_keyring), so the hashes
 * stay valid after k0 is removed (docs/OPERATIONS.md "Rotating SECRETS_KEY").
 */
export function legacyHostSyncHashKey(secretsKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', secretsKey, Buffer.alloc(0), HKDF_INFO, 32));
}

/**
 * Host-sync client secrets are stored only as HMAC-SHA256 under the host-sync
 * hash key (itself secret: derived from SECRETS_KEY, or sealed in the
 * database), so a copy of the table alone cannot confirm a guess.
 */
export class HostSyncHasher {
  /** Compared against when there is no real row, so that path costs the same. */
  readonly dummyHash: string;

  constructor(private readonly key: Buffer) {
    this.dummyHash = this.hash(randomBytes(32).toString('base64url'));
  }

  hash(secret: string): string {
    return createHmac('sha256', this.key).update(secret, 'utf8').digest('hex');
  }

  /** Constant-time check of a presented secret against a stored hash. */
  matches(secret: string, storedHash: string): boolean {
    const presented = Buffer.from(this.hash(secret), 'hex');
    const stored = Buffer.from(storedHash, 'hex');
    // Stored hashes are always 32 bytes; the length check only guards corruption.
    return stored.length === presented.length && timingSafeEqual(presented, stored);
  }
}
