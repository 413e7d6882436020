import { createLogger } from '@service-relay/core';
import type { TenantEventBus } from '@service-relay/tenant-events';
import { describe, expect, it } from 'vitest';
import type { TenantStore } from '../store/tenant-store';
import type { TenantChange } from './tenant';
import { TenantAdmin } from './tenant-admin';

const tenant = {
  tenantId: '0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4',
  hostSyncClientId: `hs_${'a'.repeat(32)}`,
  disabled: true,
  version: 2,
  primaryKeyVersion: 1,
  previousKeyVersion: null,
  createdAt: new Date(0),
  updatedAt: new Date(0),
};

describe('TenantAdmin', () => {
  it('returns the committed change and logs when the bus cannot publish', async () => {
    const lines: string[] = [];
    const logger = createLogger({ service: 'test', destination: { write: (s: string) => void lines.push(s) } });
    const change: TenantChange = { tenant, event: { kind: 'disabled', version: 2, revokedKeyVersions: [] } };
    const store = { setDisabled: async () => change } as unknown as TenantStore;
    const bus = {
      publish: async () => {
        throw new Error('bus down');
      },
    } as unknown as TenantEventBus;
    expect(await new TenantAdmin(store, bus, logger).apply(tenant.tenantId, 'disable')).toBe(change);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged).toContainEqual(expect.objectContaining({ level: 50, tenant_id: tenant.tenantId, kind: 'disabled', msg: 'tenant event not published; the change is committed' }));
  });

  it('publishes nothing for a change without an event', async () => {
    const published: unknown[] = [];
    const store = { rotateHostSync: async () => ({ tenant, hostSyncSecret: 's' }) } as unknown as TenantStore;
    const bus = { publish: async (e: unknown) => void published.push(e) } as unknown as TenantEventBus;
    await new TenantAdmin(store, bus, createLogger({ service: 'test', level: 'silent' })).apply(tenant.tenantId, 'rotate_host_sync');
    expect(published).toEqual([]);
  });
});
