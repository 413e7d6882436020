import { tenantConnectionsContract } from './tenant-connections.contract';
import { MemoryTenantConnections } from './memory-tenant-connections';

tenantConnectionsContract('memory', {
  make: (limit) => {
    const one = new MemoryTenantConnections(limit);
    return Promise.resolve({ a: one, b: one });
  },
  settle: () => Promise.resolve(),
});
