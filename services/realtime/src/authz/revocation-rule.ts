import type { TenantEvent } from '@service-relay/tenant-events';

/**
 * What a tenant change does to one live connection: `revoked` (its token no
 * longer holds: closed with 4401) or `disconnected` (the host asked for the
 * user to go: closed with 4409). The WebSocket side picks the close frame
 * (ws/revocation.ts).
 */
export type RevocationVerdict = 'revoked' | 'disconnected';

/** What the rule reads of a connection's verified identity (a VerifiedIdentity fits). */
export interface RevocationSubject {
  readonly tenantId: string;
  readonly userId: string;
  readonly keyVersion: number;
  /** The token's `iat` (unix seconds), when it had one. */
  readonly issuedAt?: number | undefined;
}

/** The verdict of one change for a connection of its tenant; undefined: it stays. */
export type RevocationRule = (subject: RevocationSubject) => RevocationVerdict | undefined;

const REVOKE_ALL: RevocationRule = () => 'revoked';

/**
 * The rule for one change (docs/CONTRACT.md "Revocation"), undefined when it
 * closes nothing. Pure: the caller applies it to the tenant's connections.
 * - `disabled`, `revoked_all` and `deleted` revoke every connection of the tenant;
 * - any change naming revoked key versions (`rotated` replacing a previous,
 *   `previous_expired`, `revoked_all`) revokes the connections whose current
 *   token was signed with one of them: a removed key version is a revocation;
 * - `user_revoked` revokes that user's connections whose token was issued
 *   before the moment (or carries no `iat`);
 * - `user_disconnected` disconnects that user's connections.
 * User ids compare case-insensitively; a malformed `detail` closes nothing.
 */
export function revocationRule(event: TenantEvent): RevocationRule | undefined {
  if (event.kind === 'disabled' || event.kind === 'revoked_all' || event.kind === 'deleted') return REVOKE_ALL;
  if (event.revoked_key_versions.length > 0) {
    const revoked = new Set(event.revoked_key_versions);
    return (s) => (revoked.has(s.keyVersion) ? 'revoked' : undefined);
  }
  if (event.kind === 'user_revoked') {
    const r = userRevocationOf(event);
    if (!r) return undefined;
    return (s) => (isUser(s, r.userId) && (s.issuedAt === undefined || s.issuedAt < r.before) ? 'revoked' : undefined);
  }
  if (event.kind === 'user_disconnected') {
    const userId = typeof event.detail?.user_id === 'string' ? event.detail.user_id : undefined;
    if (userId === undefined) return undefined;
    return (s) => (isUser(s, userId) ? 'disconnected' : undefined);
  }
  return undefined;
}

/**
 * Whether a fresh verdict is still the same holder as a live connection: same
 * tenant, same user (case-insensitively). A refresh for anyone else is refused
 * (`identity_mismatch`), and a re-verification that finds anyone else revokes.
 */
export function sameHolder(current: RevocationSubject, next: RevocationSubject): boolean {
  return next.tenantId === current.tenantId && isUser(next, current.userId);
}

/** `{user_id, before}` of a user_revoked change; undefined when malformed (logged by nobody: the registry writes it). */
function userRevocationOf(event: TenantEvent): { userId: string; before: number } | undefined {
  const d = event.detail;
  if (typeof d?.user_id !== 'string' || typeof d.before !== 'number') return undefined;
  return { userId: d.user_id, before: d.before };
}

function isUser(subject: RevocationSubject, userId: string): boolean {
  return subject.userId.toLowerCase() === userId.toLowerCase();
}
