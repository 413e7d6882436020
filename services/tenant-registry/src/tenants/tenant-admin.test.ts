import { createLogger } from '@service-relay/core';
import { describe, expect, it } from 'vitest';
import type { TenantStore } from '../store/tenant-store';
import type { Propagation, PropagationResult } from './propagation';
import type { TenantChange } from './tenant';
import { TenantAdmin } from './tenant-admin';

const tenant = {
  tenantId: '0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4',
  hostSyncClientId: `hs_${'a'.repeat(32)}`,
  disabled: true,
  version: 2,
  primaryKeyVersion: 1,
  previousKeyVersion: null,
  hasPreviousHostSync: false,
  createdAt: new Date(0),
  updatedAt: new Date(0),
  name: null,
  labels: {},
};

function propagation(result: PropagationResult, awaited: number[]): Propagation {
  return {
    awaitInForce: async (_tenantId: string, change: { seq: number }) => {
      awaited.push(change.seq);
      return result;
    },
  } as unknown as Propagation;
}

describe('TenantAdmin', () => {
  it('waits for the committed change by its feed sequence and returns what propagation found', async () => {
    const lines: string[] = [];
    const logger = createLogger({ service: 'test', destination: { write: (s: string) => void lines.push(s) } });
    const change: TenantChange = { tenant, event: { kind: 'disabled', version: 2, revokedKeyVersions: [], seq: 17 } };
    const store = { setDisabled: async () => change } as unknown as TenantStore;
    const awaited: number[] = [];
    const result = { confirmed: false, pending: [{ consumerId: 'realtime-x', kind: 'realtime', appliedSeq: 16 }], waitedMs: 3000 };
    const outcome = await new TenantAdmin(store, propagation(result, awaited), logger).apply(tenant.tenantId, 'disable');
    expect(awaited).toEqual([17]);
    expect(outcome).toMatchObject({ tenant, propagation: result });
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged).toContainEqual(expect.objectContaining({ level: 40, tenant_id: tenant.tenantId, seq: 17, pending: ['realtime-x'] }));
  });

  it('waits for nothing when the change concerns no consumer (host-sync rotation)', async () => {
    const store = { rotateHostSync: async () => ({ tenant, hostSyncSecret: 's' }) } as unknown as TenantStore;
    const awaited: number[] = [];
    const outcome = await new TenantAdmin(store, propagation({ confirmed: true, pending: [], waitedMs: 0 }, awaited), createLogger({ service: 'test', level: 'silent' })).apply(
      tenant.tenantId,
      'rotate_host_sync',
    );
    expect(awaited).toEqual([]);
    expect(outcome?.propagation).toBeUndefined();
  });
});
