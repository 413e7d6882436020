import { withTimeout, type Logger } from '@service-relay/core';
import type { TenantEventBus } from '@service-relay/tenant-events';
import type { TenantStore } from '../store/tenant-store';
import type { ListPosition, Tenant, TenantChange, TenantPage } from './tenant';

const PUBLISH_DEADLINE_MS = 5000;

export type TenantAction = 'disable' | 'enable' | 'rotate' | 'expire_previous' | 'revoke_all' | 'rotate_host_sync';

/**
 * Admin operations: the store commits the change, then the change is
 * published and awaited, so that when the caller answers, every consumer has
 * applied it. A bus failure does not undo the committed change (consumers that
 * lost the bus stop trusting their caches); it is logged.
 */
export class TenantAdmin {
  constructor(
    private readonly store: TenantStore,
    private readonly bus: TenantEventBus,
    private readonly logger: Logger,
  ) {}

  async create(): Promise<TenantChange & { hostSyncSecret: string }> {
    const change = await this.store.create();
    await this.publish(change);
    this.logger.info({ tenant_id: change.tenant.tenantId }, 'tenant created');
    return change;
  }

  get(tenantId: string): Promise<Tenant | undefined> {
    return this.store.get(tenantId);
  }

  list(limit: number, after?: ListPosition): Promise<TenantPage> {
    return this.store.list(limit, after);
  }

  /** Undefined when the tenant does not exist. */
  async apply(tenantId: string, action: TenantAction): Promise<TenantChange | undefined> {
    const change = await this.run(tenantId, action);
    if (!change) return undefined;
    await this.publish(change);
    if (change.event || change.hostSyncSecret) this.logger.info({ tenant_id: tenantId, action, version: change.tenant.version }, 'tenant changed');
    return change;
  }

  private run(tenantId: string, action: TenantAction): Promise<TenantChange | undefined> {
    switch (action) {
      case 'disable':
        return this.store.setDisabled(tenantId, true);
      case 'enable':
        return this.store.setDisabled(tenantId, false);
      case 'rotate':
        return this.store.rotate(tenantId);
      case 'expire_previous':
        return this.store.expirePrevious(tenantId);
      case 'revoke_all':
        return this.store.revokeAll(tenantId);
      case 'rotate_host_sync':
        return this.store.rotateHostSync(tenantId);
    }
  }

  private async publish(change: TenantChange): Promise<void> {
    const e = change.event;
    if (!e) return;
    const fields = { tenant_id: change.tenant.tenantId, kind: e.kind, version: e.version };
    try {
      // The bus bounds its own ack wait; this bounds a bus that cannot even send,
      // so an admin call never hangs on an unreachable Redis.
      const result = await withTimeout(this.bus.publish({ ...fields, revoked_key_versions: e.revokedKeyVersions }), PUBLISH_DEADLINE_MS);
      this.logger.debug({ ...fields, ...result }, 'tenant event published');
    } catch (err) {
      this.logger.error({ ...fields, err }, 'tenant event not published; the change is committed');
    }
  }
}
