import { createHmac, randomUUID } from 'node:crypto';

/** What the bench needs to sign tokens for one tenant (the fetched secret). */
export interface TenantKey {
  tenantId: string;
  secret: string;
  /** A `cap` claim every token signed with this key carries (the channel-rules row). */
  cap?: Record<string, string[]>;
}

const b64url = (s: string): string => Buffer.from(s).toString('base64url');

/**
 * A contract token (CONTRACT.md "Tokens") signed with node:crypto: fast enough
 * to pre-sign thousands in a client process before a timed window.
 */
export function signToken(key: TenantKey, userId: string = randomUUID(), ttlS = 3600): string {
  const header = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: key.tenantId }));
  const now = Math.floor(Date.now() / 1000);
  const payload = b64url(JSON.stringify({ iss: 'service-relay', aud: 'service-relay', tenant_id: key.tenantId, user_id: userId, iat: now, exp: now + ttlS, ...(key.cap && { cap: key.cap }) }));
  const input = `${header}.${payload}`;
  const sig = createHmac('sha256', key.secret).update(input).digest('base64url');
  return `${input}.${sig}`;
}

export function signTokens(key: TenantKey, count: number): string[] {
  return Array.from({ length: count }, () => signToken(key));
}
