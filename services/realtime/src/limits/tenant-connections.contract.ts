import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Admission, TenantConnections } from './tenant-connections';

/** Two handles on one shared count (two instances; one process for the memory driver: the same object twice). */
export interface TenantConnectionsFixture {
  make(limit: number): Promise<{ a: TenantConnections; b: TenantConnections }>;
  /** Lets any write that follows a release reach the shared store. */
  settle(): Promise<void>;
}

const admitted = (x: Admission) => {
  if (!x.ok) throw new Error(`refused at ${x.limit}`);
  return x.slot;
};

/** The behaviour every TenantConnections driver has. */
export function tenantConnectionsContract(name: string, fixture: TenantConnectionsFixture): void {
  describe(`TenantConnections contract: ${name}`, () => {
    it('admits up to the limit per tenant, refuses the next with the limit, and frees a slot on release', async () => {
      const { a, b } = await fixture.make(3);
      const tenant = randomUUID();
      const slots = [admitted(await a.acquire(tenant)), admitted(await b.acquire(tenant)), admitted(await a.acquire(tenant))];
      expect(await b.acquire(tenant)).toEqual({ ok: false, limit: 3 });
      expect(await a.acquire(tenant)).toEqual({ ok: false, limit: 3 });
      // Another tenant has its own count.
      expect((await b.acquire(randomUUID())).ok).toBe(true);
      slots[1]!.release();
      // Released twice counts once.
      slots[1]!.release();
      await fixture.settle();
      admitted(await a.acquire(tenant));
      expect((await b.acquire(tenant)).ok).toBe(false);
    });

    it('concurrent acquires never pass the limit', async () => {
      const { a, b } = await fixture.make(5);
      const tenant = randomUUID();
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).acquire(tenant)));
      expect(results.filter((r) => r.ok)).toHaveLength(5);
    });

    it('close() gives back every slot the handle holds', async () => {
      const { a, b } = await fixture.make(2);
      const tenant = randomUUID();
      admitted(await a.acquire(tenant));
      admitted(await a.acquire(tenant));
      expect((await b.acquire(tenant)).ok).toBe(false);
      await a.close();
      await fixture.settle();
      admitted(await b.acquire(tenant));
      admitted(await b.acquire(tenant));
    });
  });
}
