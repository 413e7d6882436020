import { backoffDelay } from './backoff.js';
import { errorFromFrame, RelayClientError } from './client-error.js';
import { CLOSE_UNAUTHORIZED, decideAfterClose } from './close-policy.js';
import { Emitter } from './emitter.js';
import { channelOf, parseServerFrame, topicOf, type JsonValue, type PresenceMember, type ServerFrame } from './frames.js';
import { RequestTable } from './requests.js';
import { connectUrl, OPEN, refusalStatus, resolveWebSocket, type WebSocketConstructor, type WebSocketLike } from './socket.js';
import { Subscription } from './subscription.js';
import { TokenRefresh } from './token-refresh.js';
import type { ConnectionState, RelayClientEvents, RelayClientOptions, SubscribeOptions, Subscribed } from './types.js';

type Timer = ReturnType<typeof setTimeout>;

interface Connection {
  ws: WebSocketLike;
  ready: boolean;
  /** The server said when to come back (`retry_after_ms` of the error frame before a 4429). */
  retryAfterMs: number | undefined;
  status: number | undefined;
  timers: Set<Timer>;
  pongTimer: Timer | undefined;
  refresh: TokenRefresh;
}

/** A connection that stayed ready this long resets the backoff. */
const STABLE_AFTER_MS = 5000;
const SUBSCRIBE_RETRIES = 3;
const MAX_TIMER_MS = 2_147_483_647;

/**
 * One logical connection to service-relay that survives drops: it
 * authenticates with `getToken`, refreshes the token before it expires,
 * reconnects with backoff, resubscribes every channel from the last message
 * it delivered and never delivers one message twice.
 */
export class RelayClient {
  private readonly emitter = new Emitter<RelayClientEvents>((err) => this.reportListenerError(err));
  private readonly WebSocketImpl: WebSocketConstructor;
  private readonly requests = new RequestTable();
  private readonly subs = new Map<string, Subscription>();
  private conn: Connection | undefined;
  private stateValue: ConnectionState = 'idle';
  private identity: { tenantId: string; userId: string; expiresAt: number } | undefined;
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
   * Subscribes to a channel (connecting if needed) and resolves with the first
   * `subscribed`. The subscription then survives reconnects: it is renewed
   * with `after` = the last message delivered, so nothing is missed or repeated.
   */
  subscribe(channel: string, options: SubscribeOptions = {}): Promise<Subscribed> {
    if (this.stateValue === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed'));
    let sub = this.subs.get(channel);
    if (sub?.confirmed) return Promise.resolve(sub.confirmed);
    if (!sub) {
      sub = new Subscription(channel, options);
      this.subs.set(channel, sub);
      if (this.conn?.ready) this.sendSubscribe(sub);
      else if (this.stateValue === 'idle') void this.connect().catch(() => {});
    }
    return sub.whenConfirmed();
  }

  /** Stops a subscription; its messages stop at once, whatever the server answers. */
  async unsubscribe(channel: string): Promise<void> {
    const sub = this.subs.get(channel);
    if (!sub) return;
    this.subs.delete(channel);
    sub.fail(new RelayClientError('closed', 'unsubscribed before it was confirmed', { topic: channel }));
    if (!this.conn?.ready) return;
    await this.request('unsubscribe', (tenantId) => ({ topic: topicOf(tenantId, channel) }), { topic: channel, queue: false }).catch((err: unknown) => {
      if ((err as RelayClientError).code !== 'connection_lost') throw err;
    });
  }

  /**
   * Publishes `data` on a channel; resolves with the stored message's id. A
   * publish made while reconnecting waits for the connection (within
   * `requestTimeoutMs`). After `connection_lost` or `timeout` it may or may
   * not have been stored: retry with the same `idempotencyKey` to store it once.
   */
  async publish(channel: string, data: JsonValue, options: { idempotencyKey?: string } = {}): Promise<{ id: string }> {
    if (data === undefined) throw new TypeError('data is required');
    const reply = await this.request('publish', (tenantId) => ({ topic: topicOf(tenantId, channel), data, ...(options.idempotencyKey !== undefined && { idempotency_key: options.idempotencyKey }) }), { topic: channel });
    return { id: (reply as { id: string }).id };
  }

  /** Who is present on a channel now. */
  async presence(channel: string): Promise<PresenceMember[]> {
    const reply = await this.request('presence', (tenantId) => ({ topic: topicOf(tenantId, channel) }), { topic: channel });
    return (reply as { members?: PresenceMember[] }).members ?? [];
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

  private async openConnection(reconnecting: boolean): Promise<void> {
    this.reconnectTimer = undefined;
    this.setState(reconnecting ? 'reconnecting' : 'connecting');
    let token: string;
    try {
      token = await this.opts.getToken();
      if (typeof token !== 'string' || token.length === 0) throw new TypeError('getToken must resolve to a non-empty string');
    } catch (err) {
      if (this.stateValue === 'closed') return;
      const error = new RelayClientError('token_provider_failed', 'getToken failed', { cause: err });
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
    this.after(conn, this.opts.connectTimeoutMs ?? 15_000, () => {
      if (!conn.ready) this.drop(conn, 'no ready in time');
    });
  }

  private newConnection(ws: WebSocketLike): Connection {
    const conn: Connection = {
      ws,
      ready: false,
      retryAfterMs: undefined,
      status: undefined,
      timers: new Set(),
      pongTimer: undefined,
      refresh: new TokenRefresh({
        getToken: () => this.opts.getToken(),
        sendAuth: async (token) => {
          await this.request('auth', () => ({ token }), { queue: false });
        },
        emitError: (error) => this.emitter.emit('error', error),
        after: (ms, fn) => this.after(conn, ms, fn),
        cancel: (timer) => {
          clearTimeout(timer);
          conn.timers.delete(timer);
        },
        current: () => this.conn === conn,
        now: this.now,
        random: this.random,
      }),
    };
    return conn;
  }

  private after(conn: Connection, ms: number, fn: () => void): Timer {
    // setTimeout fires at once past 2^31-1 ms (a token valid for more than 24 days).
    const t = setTimeout(() => {
      conn.timers.delete(t);
      fn();
    }, Math.min(ms, MAX_TIMER_MS));
    conn.timers.add(t);
    return t;
  }

  /** Gives up on a connection that does not answer: stops listening to it and treats it as dropped (1006). */
  private drop(conn: Connection, why: string): void {
    if (this.conn !== conn) return;
    conn.ws.onclose = null;
    conn.ws.onmessage = null;
    try {
      conn.ws.close(4000, why);
    } catch {
      // Already closing.
    }
    this.onClosed(conn, 1006, why);
  }

  private onClosed(conn: Connection, code: number, reason: string): void {
    if (this.conn !== conn) return;
    this.conn = undefined;
    for (const t of conn.timers) clearTimeout(t);
    clearTimeout(conn.pongTimer);
    this.requests.failSent(code);
    for (const sub of this.subs.values()) sub.ref = undefined;
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
    if (conn) {
      for (const t of conn.timers) clearTimeout(t);
      clearTimeout(conn.pongTimer);
      conn.ws.onclose = null;
      conn.ws.onmessage = null;
      try {
        conn.ws.close(1000, 'client closed');
      } catch {
        // Not open yet or already closing.
      }
    }
    this.setState('closed');
    const failure = () => error ?? new RelayClientError('closed', 'the client was closed');
    this.requests.failAll(failure);
    for (const sub of this.subs.values()) sub.fail(failure());
    for (const w of this.connectWaiters.splice(0)) w.reject(failure());
    if (error) this.emitter.emit('error', error);
  }

  // ---- frames ----

  private onData(conn: Connection, data: unknown): void {
    if (this.conn !== conn) return;
    // Any frame proves the connection is alive.
    clearTimeout(conn.pongTimer);
    conn.pongTimer = undefined;
    const frame = parseServerFrame(data);
    if (!frame) return this.emitter.emit('error', new RelayClientError('protocol_error', 'a frame that is not a JSON object with a type'));
    if (frame.type !== 'batch') return this.onFrame(conn, frame);
    // Several frames of one server tick, in order: each handled as if it had come alone.
    if (!Array.isArray(frame.frames)) return this.emitter.emit('error', new RelayClientError('protocol_error', 'a batch frame without a frames array'));
    // A compact batch names one topic; its messages of that topic come as their members after `topic` only.
    const topic = typeof frame.topic === 'string' ? frame.topic : undefined;
    for (const inner of frame.frames) {
      if (this.conn !== conn) return;
      if (typeof inner !== 'object' || inner === null || Array.isArray(inner)) {
        this.emitter.emit('error', new RelayClientError('protocol_error', 'a batch frame holding something other than frames'));
        continue;
      }
      const type = (inner as { type?: unknown }).type;
      if (type === undefined && topic !== undefined) {
        this.onFrame(conn, { ...(inner as object), type: 'message', topic } as ServerFrame);
        continue;
      }
      if (typeof type !== 'string' || type === 'batch') {
        this.emitter.emit('error', new RelayClientError('protocol_error', 'a batch frame holding something other than frames'));
        continue;
      }
      this.onFrame(conn, inner as ServerFrame);
    }
  }

  private onFrame(conn: Connection, frame: ServerFrame): void {
    switch (frame.type) {
      case 'ready':
        return this.onReady(conn, frame);
      case 'subscribed':
        return this.onSubscribed(frame);
      case 'message':
        return this.onMessage(frame);
      case 'authenticated':
        if (this.identity) this.identity = { ...this.identity, expiresAt: frame.expires_at };
        conn.refresh.schedule(frame.expires_at);
        this.emitter.emit('token_refreshed', { expiresAt: frame.expires_at });
        this.requests.settle(frame);
        return;
      case 'join':
      case 'leave':
        return this.emitter.emit(frame.type, { channel: channelOf(frame.topic), topic: frame.topic, member: frame.member });
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
    this.after(conn, STABLE_AFTER_MS, () => {
      this.attempt = 0;
      this.policyCloses = 0;
    });
    this.setState('open');
    conn.refresh.schedule(frame.expires_at);
    this.schedulePing(conn);
    for (const sub of this.subs.values()) this.sendSubscribe(sub);
    for (const [ref, req] of this.requests.unsent()) {
      req.sent = true;
      this.send(conn, { type: req.type, ...req.build(frame.tenant_id), ref });
    }
    this.emitter.emit('ready', { ...this.identity, reconnected });
    for (const w of this.connectWaiters.splice(0)) w.resolve();
  }

  private send(conn: Connection, frame: Record<string, unknown>): void {
    if (conn.ws.readyState === OPEN) conn.ws.send(JSON.stringify(frame));
  }

  private request(type: string, build: (tenantId: string) => Record<string, unknown>, o: { topic?: string; queue?: boolean }): Promise<ServerFrame> {
    if (this.stateValue === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed', { frame: type }));
    const conn = this.conn;
    if (o.queue === false && !conn?.ready) return Promise.reject(new RelayClientError('connection_lost', 'not connected', { frame: type }));
    return new Promise((resolve, reject) => {
      const { ref, entry } = this.requests.add({ build, type, ...(o.topic !== undefined && { topic: o.topic }), resolve, reject }, this.opts.requestTimeoutMs ?? 10_000);
      if (conn?.ready && this.identity) {
        entry.sent = true;
        this.send(conn, { type, ...build(this.identity.tenantId), ref });
      } else if (this.stateValue === 'idle') {
        void this.connect().catch(() => {});
      }
    });
  }

  private sendSubscribe(sub: Subscription): void {
    const conn = this.conn;
    if (!conn?.ready || !this.identity) return;
    sub.ref = `s${sub.channel}:${this.now()}:${Math.floor(this.random() * 1e9)}`;
    this.send(conn, sub.frame(topicOf(this.identity.tenantId, sub.channel), sub.ref));
  }

  private subscriptionByRef(ref: unknown): Subscription | undefined {
    if (typeof ref !== 'string') return undefined;
    for (const sub of this.subs.values()) if (sub.ref === ref) return sub;
    return undefined;
  }

  private onSubscribed(frame: Extract<ServerFrame, { type: 'subscribed' }>): void {
    const sub = this.subscriptionByRef(frame.ref) ?? this.subs.get(channelOf(frame.topic));
    if (!sub) return;
    const info = sub.confirm(frame);
    this.emitter.emit('subscribed', info);
    if (frame.recovered === false) this.emitter.emit('gap', { channel: sub.channel, topic: frame.topic, reason: frame.reason ?? 'history_lost' });
    sub.settle(info);
  }

  private onMessage(frame: Extract<ServerFrame, { type: 'message' }>): void {
    const channel = channelOf(frame.topic);
    const sub = this.subs.get(channel);
    if (!sub || !sub.seen.admit(frame.id)) return;
    this.emitter.emit('message', {
      channel,
      topic: frame.topic,
      id: frame.id,
      userId: frame.user_id,
      from: frame.from === 'server' || frame.user_id === null ? 'server' : 'user',
      data: frame.data,
      createdAt: frame.created_at,
    });
  }

  private onError(frame: Extract<ServerFrame, { type: 'error' }>): void {
    if (this.requests.settle(frame)) return;
    const sub = this.subscriptionByRef(frame.ref);
    if (sub) return this.onSubscribeRefused(sub, errorFromFrame(frame, { frame: 'subscribe', topic: sub.channel }));
    // A ping answered by a server without `pong` still proves the connection is alive.
    if (typeof frame.ref === 'string' && frame.ref.startsWith('ping') && frame.code === 'invalid_frame') return;
    const error = errorFromFrame(frame, {});
    // Sent just before a close (4429 too_many_connections): the next attempt waits at least this long.
    if (error.details.retryAfterMs !== undefined && this.conn) this.conn.retryAfterMs = error.details.retryAfterMs;
    this.emitter.emit('error', error);
  }

  /** A subscribe (first or renewed) refused: transient codes are retried, the rest end the subscription. */
  private onSubscribeRefused(sub: Subscription, error: RelayClientError): void {
    const code = error.code;
    sub.ref = undefined;
    const conn = this.conn;
    if ((code === 'unavailable' || code === 'internal') && conn) {
      if (sub.retries++ < SUBSCRIBE_RETRIES) {
        this.after(conn, backoffDelay(sub.retries, {}, this.random), () => this.sendSubscribe(sub));
        return;
      }
      // This instance keeps failing: another may be healthy (PROTOCOL.md `unavailable`).
      sub.retries = 0;
      return this.drop(conn, 'subscribe keeps failing');
    }
    this.subs.delete(sub.channel);
    if (sub.waiting) sub.fail(error);
    else this.emitter.emit('error', error);
  }

  // ---- keeping the connection authenticated and alive ----

  private schedulePing(conn: Connection): void {
    const interval = this.opts.pingIntervalMs ?? 25_000;
    if (interval <= 0) return;
    this.after(conn, interval, () => {
      if (this.conn !== conn) return;
      this.send(conn, { type: 'ping', ref: `ping${this.now()}` });
      // Armed by the first unanswered ping, cleared by any frame: later pings do not push it back.
      conn.pongTimer ??= setTimeout(() => this.drop(conn, 'ping timeout'), this.opts.pingTimeoutMs ?? 10_000);
      this.schedulePing(conn);
    });
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
