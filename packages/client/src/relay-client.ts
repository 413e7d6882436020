import { RelayClientError } from './client-error.js';
import type { RelayChannel } from './channel.js';
import { ConnectionMachine } from './connection-machine.js';
import { Emitter } from './emitter.js';
import { topicOf, type JsonValue, type PresenceMember } from './frames.js';
import { fetchHistory, restBaseOf, tenantOfToken } from './history.js';
import { newIdempotencyKey } from './publish-key.js';
import { RequestTable } from './requests.js';
import { Subscriptions } from './subscriptions.js';
import type { ConnectionState, HistoryOptions, HistoryPage, PublishOptions, RelayClientEvents, RelayClientOptions, SubscribeOptions, Subscribed } from './types.js';

/** history() reuses the connection's token while it has at least this long left. */
const TOKEN_REUSE_MARGIN_MS = 30_000;

/**
 * One logical connection to service-relay that survives drops: it
 * authenticates with `getToken`, refreshes the token before it expires,
 * reconnects with backoff, resubscribes every channel from the last message
 * it delivered and never delivers one message twice. This file is the public
 * API; connection-machine.ts is the connection's state machine,
 * subscriptions.ts renews the channels (resume), requests.ts pairs requests
 * with their answers.
 */
export class RelayClient {
  private readonly emitter = new Emitter<RelayClientEvents>((err) => this.reportListenerError(err));
  private readonly requests: RequestTable;
  private readonly subs: Subscriptions;
  private readonly machine: ConnectionMachine;

  constructor(private readonly opts: RelayClientOptions) {
    if (typeof opts.url !== 'string' || opts.url.length === 0) throw new TypeError('url is required');
    if (typeof opts.getToken !== 'function') throw new TypeError('getToken is required');
    // The three ride on each other: each reaches the machine only once the client is built.
    this.requests = new RequestTable({
      state: () => this.machine.state,
      readyTenant: () => this.machine.readyTenant(),
      send: (frame) => this.machine.send(frame),
      connectIfIdle: () => this.machine.connectIfIdle(),
      get timeoutMs() {
        return opts.requestTimeoutMs ?? 10_000;
      },
    });
    this.subs = new Subscriptions({
      events: this.emitter,
      readyTenant: () => this.machine.readyTenant(),
      send: (frame) => this.machine.send(frame),
      later: (ms, fn) => this.machine.later(ms, fn),
      dropConnection: (why) => this.machine.dropCurrent(why),
      connectIfIdle: () => this.machine.connectIfIdle(),
      onListenerError: (err) => this.reportListenerError(err),
      now: opts.now ?? Date.now,
      random: opts.random ?? Math.random,
    });
    this.machine = new ConnectionMachine(opts, { events: this.emitter, subs: this.subs, requests: this.requests });
  }

  get state(): ConnectionState {
    return this.machine.state;
  }

  /** The tenant and user of the current token (after the first `ready`). */
  get user(): { tenantId: string; userId: string; expiresAt: number } | undefined {
    return this.machine.identity;
  }

  on<K extends keyof RelayClientEvents>(event: K, listener: (payload: RelayClientEvents[K]) => void): () => void {
    return this.emitter.on(event, listener);
  }

  once<K extends keyof RelayClientEvents>(event: K, listener: (payload: RelayClientEvents[K]) => void): () => void {
    return this.emitter.once(event, listener);
  }

  off<K extends keyof RelayClientEvents>(event: K, listener: (payload: RelayClientEvents[K]) => void): void {
    this.emitter.off(event, listener);
  }

  /** Connects (if not yet) and resolves at the next `ready`; rejects if the client gives up first. */
  connect(): Promise<void> {
    return this.machine.connect();
  }

  /**
   * The object of one channel, with its own events (`message`, `presence`,
   * `state`, `subscribed`, `gap`, `error`) and methods (`subscribe`,
   * `publish`, `history`, `presence`, `unsubscribe`). The same object for a
   * name every time; nothing is sent until it is used.
   */
  channel(name: string): RelayChannel {
    return this.subs.channel(name, this);
  }

  /**
   * Subscribes to a channel (connecting if needed) and resolves with the first
   * `subscribed`. The subscription then survives reconnects: it is renewed
   * with `after` = the last message delivered, so nothing is missed or repeated.
   */
  subscribe(channel: string, options: SubscribeOptions = {}): Promise<Subscribed> {
    if (this.machine.state === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed'));
    return this.subs.subscribe(channel, options);
  }

  /** Stops a subscription; its messages stop at once, whatever the server answers. */
  async unsubscribe(channel: string): Promise<void> {
    if (!this.subs.remove(channel) || this.machine.readyTenant() === undefined) return;
    await this.requests.request('unsubscribe', (tenantId) => ({ topic: topicOf(tenantId, channel) }), { topic: channel, queue: false }).catch((err: unknown) => {
      if ((err as RelayClientError).code !== 'connection_lost') throw err;
    });
  }

  /**
   * Publishes `data` on a channel; resolves with the stored message's id. A
   * publish made while reconnecting waits for the connection (within
   * `requestTimeoutMs`). It carries an idempotency key (a fresh one unless
   * given; `false`: none), so one whose connection dropped before the
   * answer is sent again on the next connection and stored once.
   */
  async publish(channel: string, data: JsonValue, options: PublishOptions = {}): Promise<{ id: string }> {
    if (data === undefined) throw new TypeError('data is required');
    const key = options.idempotencyKey === false ? undefined : (options.idempotencyKey ?? newIdempotencyKey());
    const build = (tenantId: string) => ({ topic: topicOf(tenantId, channel), data, ...(key !== undefined && { idempotency_key: key }) });
    const reply = await this.requests.request('publish', build, { topic: channel, resend: key !== undefined });
    return { id: (reply as { id: string }).id };
  }

  /** Who is present on a channel now. */
  async presence(channel: string): Promise<PresenceMember[]> {
    const reply = await this.requests.request('presence', (tenantId) => ({ topic: topicOf(tenantId, channel) }), { topic: channel });
    return (reply as { members?: PresenceMember[] }).members ?? [];
  }

  /**
   * A page of the channel's history over REST (`GET /api/v1/channels/{c}/messages`
   * on the gateway), oldest first, with `epoch` and, given `after`,
   * `recovered`. To go on live from it: `subscribe(channel, { after: last id, epoch })`.
   */
  async history(channel: string, options: HistoryOptions = {}): Promise<HistoryPage> {
    if (this.machine.state === 'closed') throw new RelayClientError('closed', 'the client is closed', { frame: 'history' });
    const token = await this.machine.tokenFor('history', TOKEN_REUSE_MARGIN_MS);
    const tenantId = this.machine.identity?.tenantId ?? tenantOfToken(token) ?? '';
    const fetchImpl = this.opts.fetch ?? globalThis.fetch.bind(globalThis);
    return fetchHistory({ base: this.opts.restUrl?.replace(/\/+$/, '') ?? restBaseOf(this.opts.url), token, tenantId, channel, fetch: fetchImpl, timeoutMs: this.opts.requestTimeoutMs ?? 10_000 }, options);
  }

  /** Closes for good: no reconnect; pending requests and subscribes fail with `closed`. */
  close(): void {
    this.machine.close();
  }

  private reportListenerError(err: unknown): void {
    // A listener's bug must not break the client; surface it where a developer looks.
    if (typeof console !== 'undefined') console.error('@service-relay/client: an event listener threw', err);
  }
}

/** `new RelayClient(options)`. */
export function createRelayClient(options: RelayClientOptions): RelayClient {
  return new RelayClient(options);
}
