import { codeOf, type Logger } from '@service-relay/core';
import type { TenantEvent } from '@service-relay/tenant-events';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import type { ConnectionRegistry, TrackedConnection } from './connection-registry';
import { CLOSE_DISCONNECTED_BY_HOST, CLOSE_TRY_AGAIN_LATER, CLOSE_UNAUTHORIZED } from './close-codes';

/**
 * Applies tenant changes to live connections (ARCHITECTURE.md "Tenant feed").
 * Closing happens before the handler resolves, and the feed reports the change
 * applied only after that, so an admin call returns after the connections are
 * closed. The feed hands over every change in order, so a missed one cannot
 * exist; a feed reset (its history is gone) re-verifies everything.
 */
export class Revocation {
  constructor(
    private readonly registry: ConnectionRegistry,
    private readonly logger: Logger,
  ) {}

  async onEvent(event: TenantEvent): Promise<void> {
    const rule = revocationRule(event);
    if (!rule) return;
    let closed = 0;
    for (const c of this.registry.ofTenant(event.tenant_id)) {
      const code = rule.closeCode(c.identity);
      if (code === undefined) continue;
      c.close(code, code === CLOSE_DISCONNECTED_BY_HOST ? 'disconnected by the host' : 'revoked');
      closed += 1;
    }
    if (closed > 0) this.logger.info({ tenant_id: event.tenant_id, kind: event.kind, closed }, 'closed revoked connections');
  }

  /** The feed lost its place (changes it would need are gone): every connection proves its token again. */
  async onReset(): Promise<void> {
    await this.reverify(this.registry.all());
  }

  private async reverify(conns: TrackedConnection[]): Promise<void> {
    await Promise.all(
      conns.map(async (c) => {
        try {
          const r = await this.registry.verifyFresh(c.token);
          const same = r.valid && r.identity.tenantId === c.identity.tenantId && r.identity.userId.toLowerCase() === c.identity.userId.toLowerCase();
          if (same) c.confirm(r.identity);
          else c.close(CLOSE_UNAUTHORIZED, 'revoked');
        } catch (err) {
          // Unproven is not trusted; the client reconnects and is checked afresh.
          this.logger.warn({ code: codeOf(err), tenant_id: c.identity.tenantId }, 'could not re-verify a connection; closing it');
          c.close(CLOSE_TRY_AGAIN_LATER, 'auth unavailable');
        }
      }),
    );
  }
}

/** What a change does to the tenant's live connections: which close, with which code. */
export interface RevocationRule {
  /** The close code for a connection of the tenant with this identity; undefined: it stays. */
  closeCode(identity: VerifiedIdentity): number | undefined;
}

const CLOSE_ALL = (): number => CLOSE_UNAUTHORIZED;

/**
 * The rule for one change (docs/CONTRACT.md "Revocation"), undefined when it
 * closes nothing: `disabled` and `revoked_all` close every connection of the
 * tenant; any change naming revoked key versions (`rotated` replacing a
 * previous, `previous_expired`, `revoked_all`) closes the connections whose
 * current token was signed with one of them, because a removed key version is
 * a revocation; `user_revoked` closes that user's connections whose token was
 * issued before the moment (or carries no `iat`); all with 4401.
 * `user_disconnected` closes that user's connections with 4409.
 */
export function revocationRule(event: TenantEvent): RevocationRule | undefined {
  if (event.kind === 'disabled' || event.kind === 'revoked_all') return { closeCode: CLOSE_ALL };
  if (event.revoked_key_versions.length > 0) {
    const revoked = new Set(event.revoked_key_versions);
    return { closeCode: (id) => (revoked.has(id.keyVersion) ? CLOSE_UNAUTHORIZED : undefined) };
  }
  if (event.kind === 'user_revoked') {
    const r = userRevocationOf(event);
    if (!r) return undefined;
    return { closeCode: (id) => (sameUser(id, r.userId) && (id.issuedAt === undefined || id.issuedAt < r.before) ? CLOSE_UNAUTHORIZED : undefined) };
  }
  if (event.kind === 'user_disconnected') {
    const userId = typeof event.detail?.user_id === 'string' ? event.detail.user_id : undefined;
    if (userId === undefined) return undefined;
    return { closeCode: (id) => (sameUser(id, userId) ? CLOSE_DISCONNECTED_BY_HOST : undefined) };
  }
  return undefined;
}

/** `{user_id, before}` of a user_revoked change; undefined when malformed (logged by nobody: the registry writes it). */
function userRevocationOf(event: TenantEvent): { userId: string; before: number } | undefined {
  const d = event.detail;
  if (typeof d?.user_id !== 'string' || typeof d.before !== 'number') return undefined;
  return { userId: d.user_id, before: d.before };
}

/** User ids compare case-insensitively. */
function sameUser(identity: VerifiedIdentity, userId: string): boolean {
  return identity.userId.toLowerCase() === userId.toLowerCase();
}
