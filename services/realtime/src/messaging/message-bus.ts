import type { ChannelRef, Message, MessageListener } from './message';
import type { Recovery } from './recovery';

export interface PublishOptions {
  /**
   * Scope (tenant, channel, key): a publish with a key already used within
   * the idempotency window returns the first message and stores nothing.
   */
  idempotencyKey?: string;
  /** The tenant's history limits (#30); default: the store's own (HISTORY_MAX_MESSAGES, HISTORY_TTL_S). */
  retention?: { maxMessages: number; ttlS: number };
}

export interface HistoryQuery {
  /** Only messages with a greater id; the first `limit` of them. Without it, the latest `limit`. */
  after?: string;
  limit: number;
  /** The epoch the client was last told, sent back with `after`. */
  epoch?: string;
  /** The tenant's history TTL (#30), which judges a gap `too_old` rather than `history_lost`; default: the store's. */
  ttlS?: number;
}

export interface HistoryPage {
  /** Oldest first. */
  messages: Message[];
  /** The channel's epoch; NO_EPOCH while the store holds no stream for it. */
  epoch: string;
  /** Only with `after`: whether everything published after it is still retained. */
  recovery?: Recovery;
}

/**
 * Channels of every tenant: stores messages (history with retention), assigns
 * ids and delivers each published message to every listener in this and, with
 * a shared backend, every other process, in id order per channel.
 */
export interface MessageBus {
  /**
   * `dataJson` is the already-serialized data; the caller has checked it
   * (publish-rule.ts). Resolves once the message is stored (and, for the
   * embedded store, written to its journal).
   */
  publish(ref: ChannelRef, userId: string, dataJson: string, opts?: PublishOptions): Promise<Message>;
  history(ref: ChannelRef, query: HistoryQuery): Promise<HistoryPage>;
  /** The channel's current epoch (NO_EPOCH when the store has no stream for it). */
  epoch(ref: ChannelRef): Promise<string>;
  /**
   * Resolves once delivery is live: every message published after that reaches
   * `listener`. The returned function stops it.
   */
  subscribe(ref: ChannelRef, listener: MessageListener): Promise<() => void>;
  /**
   * Removes everything stored of a deleted tenant (#30): every channel's
   * history, epoch and idempotency keys (and, embedded, its journal lines).
   * Returns how many channels (Redis: keys) went.
   */
  purgeTenant(tenantId: string): Promise<number>;
  ready(): Promise<boolean>;
  close(): Promise<void>;
}
