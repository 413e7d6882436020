import { describe } from 'vitest';
import { MemoryTenantEventBus } from './memory-tenant-event-bus';
import { tenantEventBusContract } from './tenant-event-bus.contract';

describe('MemoryTenantEventBus', () => {
  // In one process every consumer listens on the same bus instance.
  tenantEventBusContract({
    async create(n) {
      const bus = new MemoryTenantEventBus();
      return { publisher: bus, consumers: Array.from({ length: n }, () => bus) };
    },
  });
});
