import { systemClock, type Clock } from '@service-relay/core';
import { compareMessageIds } from './message-id';
import { makeMessage, type ChannelRef, type Message, type MessageListener } from './message';
import type { HistoryQuery, MessageBus } from './message-bus';

export interface RetentionOptions {
  /** Messages kept per channel (at least). */
  maxMessages: number;
  /** A channel idle this long loses its history. */
  ttlS: number;
}

interface ChannelLog {
  messages: Message[];
  lastMs: number;
  lastSeq: number;
  expiresAt: number;
}

const SWEEP_EVERY_MS = 60_000;

/** In-process channels: valid when every realtime instance is this one process. */
export class MemoryMessageBus implements MessageBus {
  private readonly logs = new Map<string, ChannelLog>();
  private readonly listeners = new Map<string, Set<MessageListener>>();
  private lastSweep: number;

  constructor(
    private readonly retention: RetentionOptions,
    private readonly clock: Clock = systemClock,
  ) {
    this.lastSweep = clock.now();
  }

  async publish(ref: ChannelRef, userId: string, dataJson: string): Promise<Message> {
    const now = this.clock.now();
    this.sweep(now);
    const key = keyOf(ref);
    let log = this.live(key, now);
    if (!log) {
      log = { messages: [], lastMs: 0, lastSeq: -1, expiresAt: 0 };
      this.logs.set(key, log);
    }
    // Same rule as Redis XADD *: the id never goes backwards, even if the clock does.
    const ms = Math.max(now, log.lastMs);
    const seq = ms === log.lastMs ? log.lastSeq + 1 : 0;
    log.lastMs = ms;
    log.lastSeq = seq;
    log.expiresAt = now + this.retention.ttlS * 1000;
    const message = makeMessage(`${ms}-${seq}`, ref.channel, userId, dataJson);
    log.messages.push(message);
    // Trim in batches, like MAXLEN ~: at least maxMessages stay.
    const max = this.retention.maxMessages;
    if (log.messages.length > max + Math.max(1, Math.floor(max / 10))) log.messages.splice(0, log.messages.length - max);
    // Delivered synchronously, so listeners see id order.
    for (const listener of this.listeners.get(key) ?? []) {
      try {
        listener(message);
      } catch {
        // One failing listener must not starve the others.
      }
    }
    return message;
  }

  async history(ref: ChannelRef, query: HistoryQuery): Promise<Message[]> {
    const messages = this.live(keyOf(ref), this.clock.now())?.messages ?? [];
    if (query.after === undefined) return messages.slice(Math.max(0, messages.length - query.limit));
    const after = query.after;
    // Binary search for the first id greater than `after`.
    let lo = 0;
    let hi = messages.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareMessageIds(messages[mid]!.id, after) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return messages.slice(lo, lo + query.limit);
  }

  async subscribe(ref: ChannelRef, listener: MessageListener): Promise<() => void> {
    const key = keyOf(ref);
    let set = this.listeners.get(key);
    if (!set) {
      set = new Set();
      this.listeners.set(key, set);
    }
    set.add(listener);
    return () => {
      const current = this.listeners.get(key);
      if (!current) return;
      current.delete(listener);
      if (current.size === 0) this.listeners.delete(key);
    };
  }

  async ready(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }

  private live(key: string, now: number): ChannelLog | undefined {
    const log = this.logs.get(key);
    if (log && log.expiresAt <= now) {
      this.logs.delete(key);
      return undefined;
    }
    return log;
  }

  private sweep(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    for (const [key, log] of this.logs) if (log.expiresAt <= now) this.logs.delete(key);
  }
}

function keyOf(ref: ChannelRef): string {
  // Channel names cannot contain '/', so this key is unambiguous.
  return `${ref.tenantId}/${ref.channel}`;
}
