import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const PREFIX = 'v1.';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/**
 * AES-256-GCM sealing of secrets at rest (registry database, verifier cache):
 * `v1.` + base64url(nonce ‖ ciphertext ‖ tag).
 * The prefix names the format so another cipher can be introduced beside it;
 * the associated data means a sealed value copied to another tenant or key
 * version does not open.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('SecretBox needs a 32-byte key');
  }

  seal(plaintext: string, aad: string): string {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, nonce);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return PREFIX + Buffer.concat([nonce, ct, cipher.getAuthTag()]).toString('base64url');
  }

  /** Throws when the value is not ours, was altered, or belongs to other associated data. */
  open(sealed: string, aad: string): string {
    if (!sealed.startsWith(PREFIX)) throw new Error('unknown sealed secret format');
    const raw = Buffer.from(sealed.slice(PREFIX.length), 'base64url');
    if (raw.length < NONCE_BYTES + TAG_BYTES) throw new Error('sealed secret too short');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, NONCE_BYTES));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}
