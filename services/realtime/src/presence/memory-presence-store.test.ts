import { MemoryPresenceStore } from './memory-presence-store';
import { presenceStoreContract } from './presence-store.contract';

presenceStoreContract('memory', {
  make: () => {
    const one = new MemoryPresenceStore();
    return Promise.resolve({ a: one, b: one, distinct: false });
  },
});
