import { backoffDelay } from './backoff.js';
import { errorFromFrame, RelayClientError } from './client-error.js';
import { RelayChannel, type ChannelOwner } from './channel.js';
import type { Emitter } from './emitter.js';
import { channelOf, topicOf, type ServerFrame } from './frames.js';
import { Subscription } from './subscription.js';
import type { ChannelState, RelayClientEvents, SubscribeOptions, Subscribed } from './types.js';

const SUBSCRIBE_RETRIES = 3;

/** What the subscriptions need from the connection they ride on. */
export interface SubscriptionsHost {
  readonly events: Emitter<RelayClientEvents>;
  /** The tenant of the current connection when it is ready, else undefined. */
  readyTenant(): string | undefined;
  /** Sends on the current connection. */
  send(frame: Record<string, unknown>): void;
  /** A timer that dies with the current connection (none without one). */
  later(ms: number, fn: () => void): void;
  /** Gives up on the current connection (another instance may be healthy). */
  dropConnection(why: string): void;
  /** Starts connecting when the client has not yet. */
  connectIfIdle(): void;
  onListenerError(err: unknown): void;
  now(): number;
  random(): number;
}

/**
 * The channels the app subscribed to, renewed on every connection from the
 * last message delivered (resume), and the channel objects that follow them.
 */
export class Subscriptions {
  private readonly subs = new Map<string, Subscription>();
  private readonly channels = new Map<string, RelayChannel>();

  constructor(private readonly host: SubscriptionsHost) {}

  channel(name: string, owner: ChannelOwner): RelayChannel {
    if (typeof name !== 'string' || name.length === 0) throw new TypeError('a channel name is required');
    let ch = this.channels.get(name);
    if (!ch) {
      ch = new RelayChannel(name, owner, (err) => this.host.onListenerError(err));
      this.channels.set(name, ch);
      const sub = this.subs.get(name);
      if (sub) ch.setState(sub.confirmed && sub.ref === undefined ? 'subscribed' : 'subscribing', sub.confirmed);
    }
    return ch;
  }

  subscribe(channel: string, options: SubscribeOptions): Promise<Subscribed> {
    let sub = this.subs.get(channel);
    if (sub?.confirmed) return Promise.resolve(sub.confirmed);
    if (!sub) {
      sub = new Subscription(channel, options);
      this.subs.set(channel, sub);
      this.setState(channel, 'subscribing');
      if (this.host.readyTenant() !== undefined) this.send(sub);
      else this.host.connectIfIdle();
    }
    return sub.whenConfirmed();
  }

  /** Forgets a channel (its messages stop at once); false when it was not subscribed. */
  remove(channel: string): boolean {
    const sub = this.subs.get(channel);
    if (!sub) return false;
    this.subs.delete(channel);
    sub.fail(new RelayClientError('closed', 'unsubscribed before it was confirmed', { topic: channel }));
    this.setState(channel, 'unsubscribed');
    return true;
  }

  /** On `ready`: every subscription renewed with `after` = the last id delivered. */
  renewAll(): void {
    for (const sub of this.subs.values()) this.send(sub);
  }

  /** The connection ended: every subscription waits for the next one. */
  connectionLost(): void {
    for (const sub of this.subs.values()) {
      sub.ref = undefined;
      this.setState(sub.channel, 'subscribing');
    }
  }

  failAll(error: () => RelayClientError): void {
    for (const sub of this.subs.values()) sub.fail(error());
  }

  onSubscribed(frame: Extract<ServerFrame, { type: 'subscribed' }>): void {
    const sub = this.byRef(frame.ref) ?? this.subs.get(channelOf(frame.topic));
    if (!sub) return;
    const info = sub.confirm(frame);
    const ch = this.channels.get(sub.channel);
    ch?.setState('subscribed', info);
    this.host.events.emit('subscribed', info);
    ch?.emit('subscribed', info);
    if (frame.recovered === false) {
      const gap = { channel: sub.channel, topic: frame.topic, reason: frame.reason ?? 'history_lost' } as const;
      this.host.events.emit('gap', gap);
      ch?.emit('gap', gap);
    }
    sub.settle(info);
  }

  onMessage(frame: Extract<ServerFrame, { type: 'message' }>): void {
    const channel = channelOf(frame.topic);
    const sub = this.subs.get(channel);
    if (!sub || !sub.seen.admit(frame.id)) return;
    const message = {
      channel,
      topic: frame.topic,
      id: frame.id,
      userId: frame.user_id,
      from: frame.from === 'server' || frame.user_id === null ? ('server' as const) : ('user' as const),
      data: frame.data,
      createdAt: frame.created_at,
    };
    this.host.events.emit('message', message);
    this.channels.get(channel)?.emit('message', message);
  }

  onPresence(frame: Extract<ServerFrame, { type: 'join' | 'leave' }>): void {
    const channel = channelOf(frame.topic);
    this.host.events.emit(frame.type, { channel, topic: frame.topic, member: frame.member });
    this.channels.get(channel)?.emit('presence', { action: frame.type, member: frame.member });
  }

  /** An error frame answering a subscribe; false when no subscribe carries its ref. */
  onError(frame: Extract<ServerFrame, { type: 'error' }>): boolean {
    const sub = this.byRef(frame.ref);
    if (!sub) return false;
    this.onRefused(sub, errorFromFrame(frame, { frame: 'subscribe', topic: sub.channel }));
    return true;
  }

  private setState(channel: string, state: ChannelState): void {
    this.channels.get(channel)?.setState(state);
  }

  private send(sub: Subscription): void {
    const tenantId = this.host.readyTenant();
    if (tenantId === undefined) return;
    sub.ref = `s${sub.channel}:${this.host.now()}:${Math.floor(this.host.random() * 1e9)}`;
    this.setState(sub.channel, 'subscribing');
    this.host.send(sub.frame(topicOf(tenantId, sub.channel), sub.ref));
  }

  private byRef(ref: unknown): Subscription | undefined {
    if (typeof ref !== 'string') return undefined;
    for (const sub of this.subs.values()) if (sub.ref === ref) return sub;
    return undefined;
  }

  /** A subscribe (first or renewed) refused: transient codes are retried, the rest end the subscription. */
  private onRefused(sub: Subscription, error: RelayClientError): void {
    sub.ref = undefined;
    if ((error.code === 'unavailable' || error.code === 'internal') && this.host.readyTenant() !== undefined) {
      if (sub.retries++ < SUBSCRIBE_RETRIES) {
        this.host.later(backoffDelay(sub.retries, {}, this.host.random), () => this.send(sub));
        return;
      }
      // This instance keeps failing: another may be healthy (PROTOCOL.md `unavailable`).
      sub.retries = 0;
      return this.host.dropConnection('subscribe keeps failing');
    }
    this.subs.delete(sub.channel);
    const ch = this.channels.get(sub.channel);
    if (sub.waiting) {
      ch?.setState('unsubscribed');
      sub.fail(error);
    } else if (!ch?.refused(error)) {
      this.host.events.emit('error', error);
    }
  }
}
