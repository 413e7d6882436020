import type { RelayClientError } from './client-error.js';
import { Emitter } from './emitter.js';
import type { JsonValue, PresenceMember } from './frames.js';
import type { ChannelEvents, ChannelState, HistoryOptions, HistoryPage, PublishOptions, SubscribeOptions, Subscribed } from './types.js';

/** What a channel object asks of its client (RelayClient; an interface to keep the modules acyclic). */
export interface ChannelOwner {
  subscribe(channel: string, options?: SubscribeOptions): Promise<Subscribed>;
  unsubscribe(channel: string): Promise<void>;
  publish(channel: string, data: JsonValue, options?: PublishOptions): Promise<{ id: string }>;
  presence(channel: string): Promise<PresenceMember[]>;
  history(channel: string, options?: HistoryOptions): Promise<HistoryPage>;
}

/**
 * One channel, with its own events (like pusher-js `channel.bind`,
 * centrifuge-js `sub.on('publication')`, ably-js `channel.subscribe`).
 * `client.channel(name)` returns the same object for a name every time; its
 * events follow the client's subscription to that channel, however it was made.
 */
export class RelayChannel {
  private readonly emitter: Emitter<ChannelEvents>;
  private stateValue: ChannelState = 'unsubscribed';
  private last: Subscribed | undefined;

  constructor(
    readonly name: string,
    private readonly owner: ChannelOwner,
    onListenerError: (err: unknown) => void,
  ) {
    this.emitter = new Emitter<ChannelEvents>(onListenerError);
  }

  get state(): ChannelState {
    return this.stateValue;
  }

  /** The last `subscribed` of this channel's current subscription (epoch, recovered, …). */
  get subscription(): Subscribed | undefined {
    return this.last;
  }

  on<K extends keyof ChannelEvents>(event: K, listener: (payload: ChannelEvents[K]) => void): () => void {
    return this.emitter.on(event, listener);
  }

  once<K extends keyof ChannelEvents>(event: K, listener: (payload: ChannelEvents[K]) => void): () => void {
    return this.emitter.once(event, listener);
  }

  off<K extends keyof ChannelEvents>(event: K, listener: (payload: ChannelEvents[K]) => void): void {
    this.emitter.off(event, listener);
  }

  /** Subscribes (connecting if needed); resolves at the first `subscribed`. See `RelayClient.subscribe`. */
  subscribe(options: SubscribeOptions = {}): Promise<Subscribed> {
    return this.owner.subscribe(this.name, options);
  }

  unsubscribe(): Promise<void> {
    return this.owner.unsubscribe(this.name);
  }

  /** Publishes on this channel, with a fresh idempotency key unless told otherwise. */
  publish(data: JsonValue, options: PublishOptions = {}): Promise<{ id: string }> {
    return this.owner.publish(this.name, data, options);
  }

  presence(): Promise<PresenceMember[]> {
    return this.owner.presence(this.name);
  }

  /** REST history of this channel (`after`, `epoch`, `limit`); the answer says `recovered` as a resubscribe would. */
  history(options: HistoryOptions = {}): Promise<HistoryPage> {
    return this.owner.history(this.name, options);
  }

  // ---- fed by the client's subscriptions ----

  /** @internal */
  setState(state: ChannelState, confirmed?: Subscribed): void {
    if (confirmed) this.last = confirmed;
    if (state === 'unsubscribed') this.last = undefined;
    if (state === this.stateValue) return;
    this.stateValue = state;
    this.emitter.emit('state', state);
  }

  /** @internal */
  emit<K extends keyof ChannelEvents>(event: K, payload: ChannelEvents[K]): void {
    this.emitter.emit(event, payload);
  }

  /** @internal A refusal nobody awaits: on the channel when anyone listens, else the caller reports it client-wide. */
  refused(error: RelayClientError): boolean {
    this.setState('unsubscribed');
    if (this.emitter.listenerCount('error') === 0) return false;
    this.emitter.emit('error', error);
    return true;
  }
}
