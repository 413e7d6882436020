import type { ChannelRef } from '../messaging/message';
import type { WebhookEventSink } from '@service-relay/webhook-events';
import type { PresenceEvent, PresenceListener, PresenceStore, PresenceWebhooks, StoredMember } from './presence-store';

interface ChannelPresence {
  /** connection id → user id */
  connections: Map<string, string>;
  /** user id → how many connections, and the data of the most recent join */
  users: Map<string, { count: number; dataJson: string | undefined }>;
  listeners: Set<PresenceListener>;
}

/**
 * Presence in this process only (the embedded default, without REDIS_URL):
 * every member is one of this process's connections, so nothing can be left
 * behind by another instance and there is nothing to sweep.
 */
export class MemoryPresenceStore implements PresenceStore {
  private readonly channels = new Map<string, ChannelPresence>();

  constructor(
    /** Webhook events of joins and leaves (#32), handed to `sink` at the change; absent: none. */
    private readonly webhooks?: PresenceWebhooks & { sink: WebhookEventSink; now: () => number },
  ) {}

  private webhook(kind: 'join' | 'leave', ref: ChannelRef, userId: string, dataJson?: string): void {
    const w = this.webhooks;
    if (!w || (w.wants && !w.wants(ref.tenantId, w.names[kind]))) return;
    w.sink({
      type: w.names[kind],
      tenantId: ref.tenantId,
      ms: w.now(),
      ...(w.withChannel && { channel: ref.channel }),
      ...(w.withUser && { userId }),
      ...(dataJson !== undefined && { dataJson }),
    });
  }

  async join(ref: ChannelRef, connId: string, userId: string, dataJson: string | undefined): Promise<void> {
    const ch = this.channel(ref, true);
    if (ch.connections.has(connId)) return;
    ch.connections.set(connId, userId);
    const user = ch.users.get(userId);
    if (user) {
      user.count++;
      user.dataJson = dataJson;
      return;
    }
    ch.users.set(userId, { count: 1, dataJson });
    emit(ch, { type: 'join', userId, dataJson });
    this.webhook('join', ref, userId, dataJson);
  }

  async leave(ref: ChannelRef, connId: string): Promise<void> {
    const key = keyOf(ref);
    const ch = this.channels.get(key);
    const userId = ch?.connections.get(connId);
    if (!ch || userId === undefined) return;
    ch.connections.delete(connId);
    const user = ch.users.get(userId)!;
    if (--user.count === 0) {
      ch.users.delete(userId);
      emit(ch, { type: 'leave', userId });
      this.webhook('leave', ref, userId);
    }
    this.forgetIfEmpty(key, ch);
  }

  async members(ref: ChannelRef): Promise<StoredMember[]> {
    const ch = this.channels.get(keyOf(ref));
    return ch ? [...ch.users].map(([userId, u]) => ({ userId, dataJson: u.dataJson })) : [];
  }

  async subscribe(ref: ChannelRef, listener: PresenceListener): Promise<() => void> {
    const key = keyOf(ref);
    const ch = this.channel(ref, true);
    ch.listeners.add(listener);
    return () => {
      ch.listeners.delete(listener);
      if (this.channels.get(key) === ch) this.forgetIfEmpty(key, ch);
    };
  }

  async purgeTenant(tenantId: string): Promise<void> {
    for (const [key, ch] of [...this.channels]) {
      if (!key.startsWith(`${tenantId}\n`)) continue;
      ch.users.clear();
      ch.connections.clear();
      this.channels.delete(key);
    }
  }

  async close(): Promise<void> {
    for (const [key, ch] of this.channels) {
      const slash = key.indexOf('\n');
      const ref = { tenantId: key.slice(0, slash), channel: key.slice(slash + 1) };
      for (const userId of ch.users.keys()) {
        emit(ch, { type: 'leave', userId });
        this.webhook('leave', ref, userId);
      }
      ch.users.clear();
      ch.connections.clear();
    }
    this.channels.clear();
  }

  private channel(ref: ChannelRef, create: boolean): ChannelPresence {
    const key = keyOf(ref);
    let ch = this.channels.get(key);
    if (!ch && create) {
      ch = { connections: new Map(), users: new Map(), listeners: new Set() };
      this.channels.set(key, ch);
    }
    return ch!;
  }

  private forgetIfEmpty(key: string, ch: ChannelPresence): void {
    if (ch.connections.size === 0 && ch.listeners.size === 0) this.channels.delete(key);
  }
}

function keyOf(ref: ChannelRef): string {
  return `${ref.tenantId}\n${ref.channel}`;
}

/**
 * Listeners hear an event on a later turn of the event loop, in order, as
 * they would from Redis: never inside the caller's stack. A leave raised by a
 * connection that a tenant feed handler closes must not be fanned out while
 * the feed is still applying that change (not current then, which would cut
 * every connection of the instance off with 1013).
 */
function emit(ch: ChannelPresence, event: PresenceEvent): void {
  const listeners = [...ch.listeners];
  setImmediate(() => {
    for (const l of listeners) {
      try {
        l(event);
      } catch {
        // One failing listener must not starve the others.
      }
    }
  });
}
