import { randomBytes, randomUUID } from 'node:crypto';

/** A JWT or host-sync secret: 32 random bytes as base64url (43 characters). */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** `hs_` + 32 hex characters. */
export function newHostSyncClientId(): string {
  return `hs_${randomBytes(16).toString('hex')}`;
}

/** A random v4 UUID, lowercase. */
export function newTenantId(): string {
  return randomUUID();
}
