import type { MessageBus } from './message-bus';

/** What a driver hands the MessageBus contract suites (message-bus-contract.ts, message-bus-contract-epochs.ts). */
export interface ContractStore {
  /** Two handles that act as two instances (the memory driver returns the same one twice). */
  buses: [MessageBus, MessageBus];
  /**
   * The store loses every stream (Redis restarted without persistence, the
   * embedded journal gone) and the handles come back on it.
   */
  loseEverything(): Promise<[MessageBus, MessageBus]>;
}
