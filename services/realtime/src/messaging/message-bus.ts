import type { ChannelRef, Message, MessageListener } from './message';

export interface HistoryQuery {
  /** Only messages with a greater id; the first `limit` of them. Without it, the latest `limit`. */
  after?: string;
  limit: number;
}

/**
 * Channels of every tenant: stores messages (history with retention), assigns
 * ids and delivers each published message to every listener in this and, with
 * a shared backend, every other process, in id order per channel.
 */
export interface MessageBus {
  /** `dataJson` is the already-serialized data; the caller has checked its size. */
  publish(ref: ChannelRef, userId: string, dataJson: string): Promise<Message>;
  /** Oldest first. */
  history(ref: ChannelRef, query: HistoryQuery): Promise<Message[]>;
  /**
   * Resolves once delivery is live: every message published after that reaches
   * `listener`. The returned function stops it.
   */
  subscribe(ref: ChannelRef, listener: MessageListener): Promise<() => void>;
  ready(): Promise<boolean>;
  close(): Promise<void>;
}
