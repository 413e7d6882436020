import type { BackoffOptions } from './backoff.js';
import type { RelayClientError } from './client-error.js';
import type { JsonValue, PresenceMember, RecoveryReason } from './frames.js';

export interface RelayClientOptions {
  /** `wss://relay.example.com/ws` (the gateway's public origin) or a realtime instance's `ws://…/ws`. */
  url: string;
  /** Asked for a token before every connection and every refresh: ask your host server for a fresh one. */
  getToken: () => Promise<string>;
  /** A WHATWG-style WebSocket constructor; default the global one. Node 20 has none: pass `WebSocket` from `ws`. */
  WebSocket?: unknown;
  /** Backoff between reconnection attempts; `false`: never reconnect. */
  reconnect?: BackoffOptions | false;
  /** How often to send `ping` on an open connection (default 25 000 ms; 0: never). */
  pingIntervalMs?: number;
  /** A connection that answers nothing this long after a `ping` is dropped and reconnected (default 10 000 ms). */
  pingTimeoutMs?: number;
  /** Publish, unsubscribe and presence requests fail with `timeout` after this (default 10 000 ms). */
  requestTimeoutMs?: number;
  /** A connection without `ready` this long after it was opened is dropped and retried (default 15 000 ms). */
  connectTimeoutMs?: number;
  /** The REST origin for `history()`; default the origin of `url` (`wss://relay.example.com/ws` → `https://relay.example.com`). */
  restUrl?: string;
  /** The fetch `history()` uses; default the global one. */
  fetch?: typeof fetch;
  /** Jitter source (tests). */
  random?: () => number;
  /** Clock in milliseconds (tests). */
  now?: () => number;
}

export type ConnectionState = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface RelayMessage {
  channel: string;
  topic: string;
  id: string;
  /** The publisher; `null` for a message the host server published (`from: "server"`). */
  userId: string | null;
  from: 'user' | 'server';
  data: JsonValue;
  createdAt: string;
}

export interface SubscribeOptions {
  /** Deliver every retained message after this id first (e.g. the last id of a history page you loaded over REST). */
  after?: string;
  /** The epoch you were last told for that `after`. */
  epoch?: string;
  /** Your presence data on this channel (shown to others in `presence()` and `join`). */
  member?: JsonValue;
}

export interface Subscribed {
  channel: string;
  topic: string;
  epoch: string;
  /** Present when the subscribe carried `after`: false means messages after it are gone. */
  recovered?: boolean;
  reason?: RecoveryReason;
  /** True when this is a resubscribe after a reconnect. */
  resubscribed: boolean;
}

export interface Gap {
  channel: string;
  topic: string;
  /** `history_lost`: the server lost history; `too_old`: trimmed by retention. Reload the channel from your own source of truth. */
  reason: RecoveryReason;
}

export interface PresenceEvent {
  channel: string;
  topic: string;
  member: PresenceMember;
}

export interface Disconnected {
  code: number;
  reason: string;
  /** Whether the client will connect again (after `delayMs`). */
  willReconnect: boolean;
  delayMs?: number;
}

export interface RelayClientEvents {
  state: ConnectionState;
  ready: { tenantId: string; userId: string; expiresAt: number; reconnected: boolean };
  message: RelayMessage;
  subscribed: Subscribed;
  gap: Gap;
  join: PresenceEvent;
  leave: PresenceEvent;
  token_refreshed: { expiresAt: number };
  disconnected: Disconnected;
  /** Failures no promise reports: a refresh refused, a resubscribe refused, the client giving up. */
  error: RelayClientError;
}

export interface PublishOptions {
  /**
   * Makes a retry safe: the server stores one message per key and channel
   * (within IDEMPOTENCY_WINDOW_S) and answers a repeat with the first id.
   * Default: a fresh random key, so the client re-sends a publish whose
   * connection dropped before the answer, on the next connection, and it is
   * stored once. `false`: no key, and a publish whose connection dropped
   * fails with `connection_lost` (it may or may not have been stored).
   */
  idempotencyKey?: string | false;
}

export interface HistoryOptions {
  /** Only messages after this id (`0-0`: from the start); without it, the latest `limit`. */
  after?: string;
  /** The epoch you were last told for `after` (checked: a different one answers `recovered: false`). */
  epoch?: string;
  /** 1..100; default 50. */
  limit?: number;
}

/** A page of REST history, oldest first (docs/API.md "Epochs and recovery"). */
export interface HistoryPage {
  channel: string;
  messages: RelayMessage[];
  /** The channel's epoch: pass it with the last id as `after` to `subscribe` to go on live with no gap. */
  epoch: string;
  /** With `after`: false means messages after it are gone (`reason` says why); reload from your source of truth. */
  recovered?: boolean;
  reason?: RecoveryReason;
}

/** Where a channel object is: `subscribing` also while the client reconnects and renews it. */
export type ChannelState = 'unsubscribed' | 'subscribing' | 'subscribed';

export interface ChannelPresenceEvent {
  action: 'join' | 'leave';
  member: PresenceMember;
}

/** The events of one channel (`client.channel(name).on(…)`). */
export interface ChannelEvents {
  message: RelayMessage;
  presence: ChannelPresenceEvent;
  state: ChannelState;
  subscribed: Subscribed;
  gap: Gap;
  /** This channel's subscription was refused (it is not kept). */
  error: RelayClientError;
}
