import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRelayError, ManualClock } from '@service-relay/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { TenantCrypto } from '../crypto/tenant-crypto';
import { createDb } from '../db/create-db';
import type { Db } from '../db/db';
import { UNKNOWN_TENANT_TTL_MS } from '../tenants/unknown-tenants';
import { TenantStore } from './tenant-store';

describe('TenantStore: unknown tenant ids are negatively cached', () => {
  const dir = mkdtempSync(join(tmpdir(), 'registry-unknown-'));
  const clock = new ManualClock(Date.now());
  let db: Db;
  let store: TenantStore;
  beforeAll(async () => {
    db = await createDb({ kind: 'pglite', dir });
    store = new TenantStore(db, new TenantCrypto(randomBytes(32)), clock);
  });
  afterAll(async () => {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers an id the database just found missing without asking it again, for the TTL only', async () => {
    const id = randomUUID();
    const query = vi.spyOn(db, 'query');
    expect(await store.getKeys(id)).toBeUndefined();
    expect(await store.findHostSyncCredential(id)).toBeUndefined();
    expect(await store.getKeys(id)).toBeUndefined();
    expect(query, 'one read for three lookups').toHaveBeenCalledTimes(1);
    clock.advance(UNKNOWN_TENANT_TTL_MS);
    expect(await store.getKeys(id)).toBeUndefined();
    expect(query).toHaveBeenCalledTimes(2);
    query.mockRestore();
  });

  it('never hides a tenant past the TTL, and forgets the id of a tenant it creates at once', async () => {
    const forget = vi.spyOn(store.unknown, 'forget');
    const created = await store.create();
    const id = created.tenant.tenantId;
    expect(forget).toHaveBeenCalledWith(id);
    expect((await store.getKeys(id))?.tenantId).toBe(id);
    // Even an entry for an existing tenant (which only a guess of a random id could make) expires.
    store.unknown.add(id);
    expect(await store.getKeys(id)).toBeUndefined();
    clock.advance(UNKNOWN_TENANT_TTL_MS);
    expect((await store.getKeys(id))?.tenantId).toBe(id);
    expect((await store.findHostSyncCredential(id))?.tenantId).toBe(id);
  });

  it('while the database is known down, a cached unknown id is `unavailable` to the host-sync check, as a known one is', async () => {
    const id = randomUUID();
    expect(await store.findHostSyncCredential(id)).toBeUndefined();
    const silent = vi.spyOn(db, 'silent', 'get').mockReturnValue(true);
    try {
      const err = await store.findHostSyncCredential(id).then(() => undefined, (e: unknown) => e);
      expect(isRelayError(err) && err.code).toBe('unavailable');
    } finally {
      silent.mockRestore();
    }
  });
});
