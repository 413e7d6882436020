import type { TenantEvent } from './tenant-event';

export type TenantEventHandler = (event: TenantEvent) => void | Promise<void>;

export interface PublishResult {
  /** Consumers (processes) the event reached. */
  delivered: number;
  /** Consumers that finished applying it before publish() returned. */
  acknowledged: number;
}

/**
 * Tenant change events. publish() resolves once every subscribed consumer has
 * run its handlers (or the ack deadline passed), so an admin call that awaits
 * it returns only after every instance has applied the change.
 */
export interface TenantEventBus {
  publish(event: Omit<TenantEvent, 'event_id'>): Promise<PublishResult>;
  /** Handlers run for every event; the consumer acknowledges after all of them finished. */
  subscribe(handler: TenantEventHandler): () => void;
  /**
   * Called when events may have been missed (the connection to the bus was
   * lost and is back): consumers drop whatever they cannot prove fresh.
   */
  onReset(handler: () => void | Promise<void>): () => void;
  /** True while events can be received. */
  isConnected(): boolean;
  ready(): Promise<boolean>;
  close(): Promise<void>;
}
