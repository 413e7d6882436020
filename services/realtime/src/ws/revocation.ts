import { codeOf, type Logger } from '@service-relay/core';
import type { TenantEvent } from '@service-relay/tenant-events';
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
    const conns = this.registry.ofTenant(event.tenant_id);
    let closed = 0;
    if (event.kind === 'disabled' || event.kind === 'revoked_all') {
      for (const c of conns) c.close(CLOSE_UNAUTHORIZED, 'revoked');
      closed = conns.length;
    } else if (event.kind === 'previous_expired' && event.revoked_key_versions.length > 0) {
      const revoked = new Set(event.revoked_key_versions);
      for (const c of conns) {
        if (!revoked.has(c.identity.keyVersion)) continue;
        c.close(CLOSE_UNAUTHORIZED, 'revoked');
        closed += 1;
      }
    } else if (event.kind === 'user_revoked') {
      const revoked = userRevocationOf(event);
      if (revoked) {
          for (const c of conns) {
          if (!sameUser(c, revoked.userId) || (c.identity.issuedAt !== undefined && c.identity.issuedAt >= revoked.before)) continue;
          c.close(CLOSE_UNAUTHORIZED, 'revoked');
          closed += 1;
        }
      }
    } else if (event.kind === 'user_disconnected') {
      const userId = typeof event.detail?.user_id === 'string' ? event.detail.user_id : undefined;
      if (userId !== undefined) {
        for (const c of conns) {
          if (!sameUser(c, userId)) continue;
          c.close(CLOSE_DISCONNECTED_BY_HOST, 'disconnected by the host');
          closed += 1;
        }
      }
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

/** `{user_id, before}` of a user_revoked change; undefined when malformed (logged by nobody: the registry writes it). */
function userRevocationOf(event: TenantEvent): { userId: string; before: number } | undefined {
  const d = event.detail;
  if (typeof d?.user_id !== 'string' || typeof d.before !== 'number') return undefined;
  return { userId: d.user_id, before: d.before };
}

/** User ids compare case-insensitively. */
function sameUser(c: TrackedConnection, userId: string): boolean {
  return c.identity.userId.toLowerCase() === userId.toLowerCase();
}
