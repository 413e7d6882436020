import { backoffDelay } from './backoff.js';
import { errorFromFrame, RelayClientError } from './client-error.js';
import type { RelayChannel } from './channel.js';
import { CLOSE_UNAUTHORIZED, decideAfterClose } from './close-policy.js';
import { Connection } from './connection.js';
import { Emitter } from './emitter.js';
import { channelOf, parseServerFrame, topicOf, unbatch, type JsonValue, type PresenceMember, type ServerFrame } from './frames.js';
import { fetchHistory, restBaseOf, tenantOfToken } from './history.js';
import { newIdempotencyKey } from './publish-key.js';
import { RequestTable } from './requests.js';
import { connectUrl, refusalStatus, resolveWebSocket, type WebSocketConstructor, type WebSocketLike } from './socket.js';
import { Subscriptions } from './subscriptions.js';
import { TokenRefresh } from './token-refresh.js';
import type { ConnectionState, HistoryOptions, HistoryPage, PublishOptions, RelayClientEvents, RelayClientOptions, SubscribeOptions, Subscribed } from './types.js';

type Timer = ReturnType<typeof setTimeout>;

/** A connection that stayed ready this long resets the backoff. */
const STABLE_AFTER_MS = 5000;
/** history() reuses the connection's token while it has at least this long left. */
const TOKEN_REUSE_MARGIN_MS = 30_000;

/**
 * One logical connection to service-relay that survives drops: it
 * authenticates with `getToken`, refreshes the token before it expires,
 * reconnects with backoff, resubscribes every channel from the last message
 * it delivered and never delivers one message twice. This file is the
 * connection's state machine; subscriptions.ts renews the channels,
 * requests.ts pairs requests with their answers.
 */
export class RelayClient {
  private readonly emitter = new Emitter<RelayClientEvents>((err) => this.reportListenerError(err));
  private readonly WebSocketImpl: WebSocketConstructor;
  private readonly requests = new RequestTable();
  private readonly subs: Subscriptions;
  private conn: Connection | undefined;
  private stateValue: ConnectionState = 'idle';
  private identity: { tenantId: string; userId: string; expiresAt: number } | undefined;
  /** The last token getToken gave (history() reuses it while the connection's expiry allows). */
  private lastToken: string | undefined;
  private attempt = 0;
  private authRefusals = 0;
  private blindFailuresAfterAuth = 0;
  private policyCloses = 0;
  private everReady = false;
  private reconnectTimer: Timer | undefined;
  private connectWaiters: { resolve: () => void; reject: (e: RelayClientError) => void }[] = [];
  private readonly random: () => number;
  private readonly now: () => number;

  constructor(private readonly opts: RelayClientOptions) {
    if (typeof opts.url !== 'string' || opts.url.length === 0) throw new TypeError('url is required');
    if (typeof opts.getToken !== 'function') throw new TypeError('getToken is required');
    this.WebSocketImpl = resolveWebSocket(opts.WebSocket);
    this.random = opts.random ?? Math.random;
    this.now = opts.now ?? Date.now;
    this.subs = new Subscriptions({
      events: this.emitter,
      readyTenant: () => (this.conn?.ready ? this.identity?.tenantId : undefined),
      send: (frame) => this.conn?.send(frame),
      later: (ms, fn) => void this.conn?.after(ms, fn),
      dropConnection: (why) => this.conn && this.drop(this.conn, why),
      connectIfIdle: () => {
        if (this.stateValue === 'idle') void this.connect().catch(() => {});
      },
      onListenerError: (err) => this.reportListenerError(err),
      now: this.now,
      random: this.random,
    });
  }

  get state(): ConnectionState {
    return this.stateValue;
  }

  /** The tenant and user of the current token (after the first `ready`). */
  get user(): { tenantId: string; userId: string; expiresAt: number } | undefined {
    return this.identity;
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
    if (this.stateValue === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed'));
    if (this.stateValue === 'open') return Promise.resolve();
    const done = new Promise<void>((resolve, reject) => this.connectWaiters.push({ resolve, reject }));
    if (this.stateValue === 'idle') void this.openConnection(false);
    return done;
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
    if (this.stateValue === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed'));
    return this.subs.subscribe(channel, options);
  }

  /** Stops a subscription; its messages stop at once, whatever the server answers. */
  async unsubscribe(channel: string): Promise<void> {
    if (!this.subs.remove(channel) || !this.conn?.ready) return;
    await this.request('unsubscribe', (tenantId) => ({ topic: topicOf(tenantId, channel) }), { topic: channel, queue: false }).catch((err: unknown) => {
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
    const reply = await this.request('publish', build, { topic: channel, resend: key !== undefined });
    return { id: (reply as { id: string }).id };
  }

  /** Who is present on a channel now. */
  async presence(channel: string): Promise<PresenceMember[]> {
    const reply = await this.request('presence', (tenantId) => ({ topic: topicOf(tenantId, channel) }), { topic: channel });
    return (reply as { members?: PresenceMember[] }).members ?? [];
  }

  /**
   * A page of the channel's history over REST (`GET /api/v1/channels/{c}/messages`
   * on the gateway), oldest first, with `epoch` and, given `after`,
   * `recovered`. To go on live from it: `subscribe(channel, { after: last id, epoch })`.
   */
  async history(channel: string, options: HistoryOptions = {}): Promise<HistoryPage> {
    if (this.stateValue === 'closed') throw new RelayClientError('closed', 'the client is closed', { frame: 'history' });
    const reusable = this.lastToken !== undefined && this.identity !== undefined && this.identity.expiresAt * 1000 - this.now() > TOKEN_REUSE_MARGIN_MS;
    const token = reusable ? this.lastToken! : await this.token('history');
    const tenantId = this.identity?.tenantId ?? tenantOfToken(token) ?? '';
    const fetchImpl = this.opts.fetch ?? globalThis.fetch.bind(globalThis);
    return fetchHistory({ base: this.opts.restUrl?.replace(/\/+$/, '') ?? restBaseOf(this.opts.url), token, tenantId, channel, fetch: fetchImpl, timeoutMs: this.opts.requestTimeoutMs ?? 10_000 }, options);
  }

  /** Closes for good: no reconnect; pending requests and subscribes fail with `closed`. */
  close(): void {
    if (this.stateValue === 'closed') return;
    this.finish(undefined);
  }

  // ---- connection lifecycle ----

  private setState(state: ConnectionState): void {
    if (this.stateValue === state) return;
    this.stateValue = state;
    this.emitter.emit('state', state);
  }

  /** A token from getToken, checked; the failure is a `token_provider_failed`. */
  private async token(what: string): Promise<string> {
    let token: unknown;
    try {
      token = await this.opts.getToken();
    } catch (err) {
      throw new RelayClientError('token_provider_failed', 'getToken failed', { frame: what, cause: err });
    }
    if (typeof token !== 'string' || token.length === 0) {
      throw new RelayClientError('token_provider_failed', 'getToken failed', { frame: what, cause: new TypeError('getToken must resolve to a non-empty string') });
    }
    this.lastToken = token;
    return token;
  }

  private async openConnection(reconnecting: boolean): Promise<void> {
    this.reconnectTimer = undefined;
    this.setState(reconnecting ? 'reconnecting' : 'connecting');
    let token: string;
    try {
      token = await this.token('connect');
    } catch (err) {
      if (this.stateValue === 'closed') return;
      const error = new RelayClientError('token_provider_failed', 'getToken failed', { cause: (err as RelayClientError).details.cause });
      // After the server refused the token, a host that cannot give a new one means stop (PROTOCOL.md 4401).
      if (this.authRefusals > 0) return this.finish(error);
      this.emitter.emit('error', error);
      this.scheduleReconnect(false);
      return;
    }
    if (this.stateValue === 'closed') return;
    let ws: WebSocketLike;
    try {
      ws = new this.WebSocketImpl(connectUrl(this.opts.url, token));
    } catch (err) {
      // A malformed URL: no retry will fix it.
      return this.finish(new RelayClientError('bad_request', `cannot open ${this.opts.url}`, { cause: err }));
    }
    const conn = this.newConnection(ws);
    this.conn = conn;
    ws.onmessage = (event) => this.onData(conn, event.data);
    ws.onerror = (event) => {
      conn.status ??= refusalStatus(event);
    };
    ws.onclose = (event) => this.onClosed(conn, event.code, event.reason);
    conn.after(this.opts.connectTimeoutMs ?? 15_000, () => {
      if (!conn.ready) this.drop(conn, 'no ready in time');
    });
  }

  private newConnection(ws: WebSocketLike): Connection {
    const conn = new Connection(ws);
    conn.refresh = new TokenRefresh({
      getToken: async () => {
        const token = await this.opts.getToken();
        if (typeof token === 'string' && token.length > 0) this.lastToken = token;
        return token;
      },
      sendAuth: async (token) => {
        await this.request('auth', () => ({ token }), { queue: false });
      },
      emitError: (error) => this.emitter.emit('error', error),
      after: (ms, fn) => conn.after(ms, fn),
      cancel: (timer) => conn.cancel(timer),
      current: () => this.conn === conn,
      now: this.now,
      random: this.random,
    });
    return conn;
  }

  /** Gives up on a connection that does not answer: stops listening to it and treats it as dropped (1006). */
  private drop(conn: Connection, why: string): void {
    if (this.conn !== conn) return;
    conn.end({ code: 4000, reason: why });
    this.onClosed(conn, 1006, why);
  }

  private onClosed(conn: Connection, code: number, reason: string): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    conn.end();
    this.requests.failSent(code);
    this.subs.connectionLost();
    if (this.stateValue === 'closed') return;
    if (this.opts.reconnect === false) {
      this.emitter.emit('disconnected', { code, reason, willReconnect: false });
      return this.finish(new RelayClientError('closed', `connection closed (${code}); reconnect is off`, { closeCode: code }));
    }
    const decision = decideAfterClose({
      code,
      wasReady: conn.ready,
      refusalStatus: conn.status,
      authRefusals: this.authRefusals,
      blindFailuresAfterAuth: this.blindFailuresAfterAuth,
      policyCloses: this.policyCloses,
    });
    if (decision.action === 'give_up') {
      this.emitter.emit('disconnected', { code, reason, willReconnect: false });
      const what = conn.ready ? `closed with ${code}` : `refused${conn.status === undefined ? '' : ` (${conn.status})`}`;
      return this.finish(new RelayClientError(decision.code, `the connection was ${what}; not reconnecting`, { closeCode: code }));
    }
    if (conn.ready) {
      if (code === CLOSE_UNAUTHORIZED) this.authRefusals++;
      this.policyCloses = code === 1008 ? this.policyCloses + 1 : 0;
    } else if (conn.status === 401) {
      this.authRefusals++;
    } else if (conn.status === undefined && code === 1006 && this.authRefusals > 0) {
      this.blindFailuresAfterAuth++;
    }
    const delayMs = this.scheduleReconnect(decision.immediate, conn.retryAfterMs ?? 0);
    this.emitter.emit('disconnected', { code, reason, willReconnect: true, delayMs });
  }

  private scheduleReconnect(immediate: boolean, atLeastMs = 0): number {
    const backoff = this.opts.reconnect === false ? {} : (this.opts.reconnect ?? {});
    const delayMs = Math.max(atLeastMs, backoffDelay(immediate ? 0 : this.attempt, backoff, this.random));
    this.attempt++;
    this.setState('reconnecting');
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.openConnection(true), delayMs);
    return delayMs;
  }

  /** The end: closes the socket, fails everything pending; `error` undefined means close() was called. */
  private finish(error: RelayClientError | undefined): void {
    const conn = this.conn;
    this.conn = undefined;
    clearTimeout(this.reconnectTimer);
    conn?.end({ code: 1000, reason: 'client closed' });
    this.setState('closed');
    const failure = () => error ?? new RelayClientError('closed', 'the client was closed');
    this.requests.failAll(failure);
    this.subs.failAll(failure);
    for (const w of this.connectWaiters.splice(0)) w.reject(failure());
    if (error) this.emitter.emit('error', error);
  }

  // ---- frames ----

  private onData(conn: Connection, data: unknown): void {
    if (this.conn !== conn) return;
    conn.heard();
    const frame = parseServerFrame(data);
    if (!frame) return this.emitter.emit('error', new RelayClientError('protocol_error', 'a frame that is not a JSON object with a type'));
    if (frame.type !== 'batch') return this.onFrame(conn, frame);
    // Several frames of one server tick, in order: each handled as if it had come alone.
    for (const inner of unbatch(frame)) {
      if (this.conn !== conn) return;
      if (inner instanceof RelayClientError) this.emitter.emit('error', inner);
      else this.onFrame(conn, inner);
    }
  }

  private onFrame(conn: Connection, frame: ServerFrame): void {
    switch (frame.type) {
      case 'ready':
        return this.onReady(conn, frame);
      case 'subscribed':
        return this.subs.onSubscribed(frame);
      case 'message':
        return this.subs.onMessage(frame);
      case 'authenticated':
        if (this.identity) this.identity = { ...this.identity, expiresAt: frame.expires_at };
        conn.refresh.schedule(frame.expires_at);
        this.emitter.emit('token_refreshed', { expiresAt: frame.expires_at });
        this.requests.settle(frame);
        return;
      case 'join':
      case 'leave':
        return this.subs.onPresence(frame);
      case 'error':
        return this.onError(frame);
      case 'presence':
        if (!this.requests.settle(frame)) this.requests.settleOldest('presence', channelOf(frame.topic), frame);
        return;
      default:
        // published, unsubscribed, pong; a type this version does not know is ignored.
        this.requests.settle(frame as ServerFrame & { ref?: string });
    }
  }

  private onReady(conn: Connection, frame: Extract<ServerFrame, { type: 'ready' }>): void {
    conn.ready = true;
    const reconnected = this.everReady;
    this.everReady = true;
    this.identity = { tenantId: frame.tenant_id, userId: frame.user_id, expiresAt: frame.expires_at };
    this.authRefusals = 0;
    this.blindFailuresAfterAuth = 0;
    conn.after(STABLE_AFTER_MS, () => {
      this.attempt = 0;
      this.policyCloses = 0;
    });
    this.setState('open');
    conn.refresh.schedule(frame.expires_at);
    conn.schedulePing(this.opts.pingIntervalMs ?? 25_000, this.opts.pingTimeoutMs ?? 10_000, () => `ping${this.now()}`, () => this.drop(conn, 'ping timeout'));
    this.subs.renewAll();
    for (const [ref, req] of this.requests.unsent()) {
      req.sent = true;
      conn.send({ type: req.type, ...req.build(frame.tenant_id), ref });
    }
    this.emitter.emit('ready', { ...this.identity, reconnected });
    for (const w of this.connectWaiters.splice(0)) w.resolve();
  }

  private request(type: string, build: (tenantId: string) => Record<string, unknown>, o: { topic?: string; queue?: boolean; resend?: boolean }): Promise<ServerFrame> {
    if (this.stateValue === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed', { frame: type }));
    const conn = this.conn;
    if (o.queue === false && !conn?.ready) return Promise.reject(new RelayClientError('connection_lost', 'not connected', { frame: type }));
    return new Promise((resolve, reject) => {
      const req = { build, type, ...(o.topic !== undefined && { topic: o.topic }), ...(o.resend && { resend: true }), resolve, reject };
      const { ref, entry } = this.requests.add(req, this.opts.requestTimeoutMs ?? 10_000);
      if (conn?.ready && this.identity) {
        entry.sent = true;
        conn.send({ type, ...build(this.identity.tenantId), ref });
      } else if (this.stateValue === 'idle') {
        void this.connect().catch(() => {});
      }
    });
  }

  private onError(frame: Extract<ServerFrame, { type: 'error' }>): void {
    if (this.requests.settle(frame)) return;
    if (this.subs.onError(frame)) return;
    // A ping answered by a server without `pong` still proves the connection is alive.
    if (typeof frame.ref === 'string' && frame.ref.startsWith('ping') && frame.code === 'invalid_frame') return;
    const error = errorFromFrame(frame, {});
    // Sent just before a close (4429 too_many_connections): the next attempt waits at least this long.
    if (error.details.retryAfterMs !== undefined && this.conn) this.conn.retryAfterMs = error.details.retryAfterMs;
    this.emitter.emit('error', error);
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
