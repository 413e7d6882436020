import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const HKDF_INFO = 'service-relay:host-sync-hash';

/**
 * Host-sync client secrets are stored only as HMAC-SHA256 under a key derived
 * from SECRETS_KEY, so a copy of the table alone cannot confirm a guess.
 */
export class HostSyncHasher {
  private readonly key: Buffer;
  /** Compared against when there is no real row, so that path costs the same. */
  readonly dummyHash: string;

  constructor(secretsKey: Buffer) {
    this.key = Buffer.from(hkdfSync('sha256', secretsKey, Buffer.alloc(0), HKDF_INFO, 32));
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
