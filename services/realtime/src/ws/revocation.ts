import { codeOf, type Logger } from '@service-relay/core';
import type { TenantEvent } from '@service-relay/tenant-events';
import { revocationRule, sameHolder, type RevocationVerdict } from '../authz/revocation-rule';
import type { ConnectionRegistry, TrackedConnection } from './connection-registry';
import { CLOSE_DISCONNECTED_BY_HOST, CLOSE_TRY_AGAIN_LATER, CLOSE_UNAUTHORIZED } from './close-codes';

/** The close frame of each verdict (docs/CONTRACT.md "Revocation"). */
const CLOSE_OF: Record<RevocationVerdict, { code: number; reason: string }> = {
  revoked: { code: CLOSE_UNAUTHORIZED, reason: 'revoked' },
  disconnected: { code: CLOSE_DISCONNECTED_BY_HOST, reason: 'disconnected by the host' },
};

/**
 * Applies tenant changes to live connections (ARCHITECTURE.md "Tenant feed"):
 * which connection a change closes is decided by authz/revocation-rule.ts;
 * this closes them. Closing happens before the handler resolves, and the feed
 * reports the change applied only after that, so an admin call returns after
 * the connections are closed. The feed hands over every change in order, so a
 * missed one cannot exist; a feed reset (its history is gone) re-verifies
 * everything.
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
      const verdict = rule(c.identity);
      if (verdict === undefined) continue;
      const { code, reason } = CLOSE_OF[verdict];
      c.close(code, reason);
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
          if (r.valid && sameHolder(c.identity, r.identity)) c.confirm(r.identity);
          else c.close(CLOSE_OF.revoked.code, CLOSE_OF.revoked.reason);
        } catch (err) {
          // Unproven is not trusted; the client reconnects and is checked afresh.
          this.logger.warn({ code: codeOf(err), tenant_id: c.identity.tenantId }, 'could not re-verify a connection; closing it');
          c.close(CLOSE_TRY_AGAIN_LATER, 'auth unavailable');
        }
      }),
    );
  }
}
