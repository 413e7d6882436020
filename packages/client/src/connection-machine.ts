import { backoffDelay } from './backoff.js';
import { errorFromFrame, RelayClientError } from './client-error.js';
import { CLOSE_UNAUTHORIZED, decideAfterClose } from './close-policy.js';
import { Connection } from './connection.js';
import type { Emitter } from './emitter.js';
import { channelOf, parseServerFrame, unbatch, type ServerFrame } from './frames.js';
import type { RequestTable } from './requests.js';
import { connectUrl, refusalStatus, resolveWebSocket, type WebSocketConstructor, type WebSocketLike } from './socket.js';
import type { Subscriptions } from './subscriptions.js';
import { TokenRefresh } from './token-refresh.js';
import type { ConnectionState, RelayClientEvents, RelayClientOptions } from './types.js';

type Timer = ReturnType<typeof setTimeout>;

/** A connection that stayed ready this long resets the backoff. */
const STABLE_AFTER_MS = 5000;

/** The tenant and user of the current token, and when it expires (unix seconds). */
export interface Identity {
  tenantId: string;
  userId: string;
  expiresAt: number;
}

/** What rides on the connection: the client's events, its subscriptions and its requests. */
export interface MachineRiders {
  readonly events: Emitter<RelayClientEvents>;
  readonly subs: Subscriptions;
  readonly requests: RequestTable;
}

/**
 * The logical connection's state machine (`idle` → `connecting` → `open` ⇄
 * `reconnecting` → `closed`): a socket opened with a token from getToken, its
 * `ready`, its close and what follows it (reconnect with backoff, or give up,
 * docs/PROTOCOL.md "Close codes"), token refresh and ping on each socket, and
 * the routing of server frames to the subscriptions and requests.
 */
export class ConnectionMachine {
  private readonly WebSocketImpl: WebSocketConstructor;
  private conn: Connection | undefined;
  private stateValue: ConnectionState = 'idle';
  private identityValue: Identity | undefined;
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

  constructor(
    private readonly opts: RelayClientOptions,
    private readonly riders: MachineRiders,
  ) {
    this.WebSocketImpl = resolveWebSocket(opts.WebSocket);
    this.random = opts.random ?? Math.random;
    this.now = opts.now ?? Date.now;
  }

  get state(): ConnectionState {
    return this.stateValue;
  }

  get identity(): Identity | undefined {
    return this.identityValue;
  }

  /** The tenant of the current connection when it is ready, else undefined. */
  readyTenant(): string | undefined {
    return this.conn?.ready ? this.identityValue?.tenantId : undefined;
  }

  /** Sends on the current connection (nothing without one). */
  send(frame: Record<string, unknown>): void {
    this.conn?.send(frame);
  }

  /** A timer that dies with the current connection (none without one). */
  later(ms: number, fn: () => void): void {
    this.conn?.after(ms, fn);
  }

  /** Gives up on the current connection (another instance may be healthy). */
  dropCurrent(why: string): void {
    if (this.conn) this.drop(this.conn, why);
  }

  connectIfIdle(): void {
    if (this.stateValue === 'idle') void this.connect().catch(() => {});
  }

  /** Connects (if not yet) and resolves at the next `ready`; rejects if the client gives up first. */
  connect(): Promise<void> {
    if (this.stateValue === 'closed') return Promise.reject(new RelayClientError('closed', 'the client is closed'));
    if (this.stateValue === 'open') return Promise.resolve();
    const done = new Promise<void>((resolve, reject) => this.connectWaiters.push({ resolve, reject }));
    if (this.stateValue === 'idle') void this.openConnection(false);
    return done;
  }

  /** Closes for good: no reconnect; pending requests and subscribes fail with `closed`. */
  close(): void {
    if (this.stateValue === 'closed') return;
    this.finish(undefined);
  }

  /** The last token, while the connection's expiry leaves it at least `marginMs`; else a new one from getToken. */
  async tokenFor(what: string, marginMs: number): Promise<string> {
    const reusable = this.lastToken !== undefined && this.identityValue !== undefined && this.identityValue.expiresAt * 1000 - this.now() > marginMs;
    return reusable ? this.lastToken! : this.token(what);
  }

  private setState(state: ConnectionState): void {
    if (this.stateValue === state) return;
    this.stateValue = state;
    this.riders.events.emit('state', state);
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
      this.riders.events.emit('error', error);
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
        await this.riders.requests.request('auth', () => ({ token }), { queue: false });
      },
      emitError: (error) => this.riders.events.emit('error', error),
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
    const { events, subs, requests } = this.riders;
    this.conn = undefined;
    conn.end();
    requests.failSent(code);
    subs.connectionLost();
    if (this.stateValue === 'closed') return;
    if (this.opts.reconnect === false) {
      events.emit('disconnected', { code, reason, willReconnect: false });
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
      events.emit('disconnected', { code, reason, willReconnect: false });
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
    events.emit('disconnected', { code, reason, willReconnect: true, delayMs });
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
    this.riders.requests.failAll(failure);
    this.riders.subs.failAll(failure);
    for (const w of this.connectWaiters.splice(0)) w.reject(failure());
    if (error) this.riders.events.emit('error', error);
  }

  // ---- frames ----

  private onData(conn: Connection, data: unknown): void {
    if (this.conn !== conn) return;
    conn.heard();
    const frame = parseServerFrame(data);
    if (!frame) return this.riders.events.emit('error', new RelayClientError('protocol_error', 'a frame that is not a JSON object with a type'));
    if (frame.type !== 'batch') return this.onFrame(conn, frame);
    // Several frames of one server tick, in order: each handled as if it had come alone.
    for (const inner of unbatch(frame)) {
      if (this.conn !== conn) return;
      if (inner instanceof RelayClientError) this.riders.events.emit('error', inner);
      else this.onFrame(conn, inner);
    }
  }

  private onFrame(conn: Connection, frame: ServerFrame): void {
    const { events, subs, requests } = this.riders;
    switch (frame.type) {
      case 'ready':
        return this.onReady(conn, frame);
      case 'subscribed':
        return subs.onSubscribed(frame);
      case 'message':
        return subs.onMessage(frame);
      case 'authenticated':
        if (this.identityValue) this.identityValue = { ...this.identityValue, expiresAt: frame.expires_at };
        conn.refresh.schedule(frame.expires_at);
        events.emit('token_refreshed', { expiresAt: frame.expires_at });
        requests.settle(frame);
        return;
      case 'join':
      case 'leave':
        return subs.onPresence(frame);
      case 'error':
        return this.onError(frame);
      case 'presence':
        if (!requests.settle(frame)) requests.settleOldest('presence', channelOf(frame.topic), frame);
        return;
      default:
        // published, unsubscribed, pong; a type this version does not know is ignored.
        requests.settle(frame as ServerFrame & { ref?: string });
    }
  }

  private onReady(conn: Connection, frame: Extract<ServerFrame, { type: 'ready' }>): void {
    conn.ready = true;
    const reconnected = this.everReady;
    this.everReady = true;
    this.identityValue = { tenantId: frame.tenant_id, userId: frame.user_id, expiresAt: frame.expires_at };
    this.authRefusals = 0;
    this.blindFailuresAfterAuth = 0;
    conn.after(STABLE_AFTER_MS, () => {
      this.attempt = 0;
      this.policyCloses = 0;
    });
    this.setState('open');
    conn.refresh.schedule(frame.expires_at);
    conn.schedulePing(this.opts.pingIntervalMs ?? 25_000, this.opts.pingTimeoutMs ?? 10_000, () => `ping${this.now()}`, () => this.drop(conn, 'ping timeout'));
    this.riders.subs.renewAll();
    this.riders.requests.sendUnsent(frame.tenant_id);
    this.riders.events.emit('ready', { ...this.identityValue, reconnected });
    for (const w of this.connectWaiters.splice(0)) w.resolve();
  }

  private onError(frame: Extract<ServerFrame, { type: 'error' }>): void {
    if (this.riders.requests.settle(frame)) return;
    if (this.riders.subs.onError(frame)) return;
    // A ping answered by a server without `pong` still proves the connection is alive.
    if (typeof frame.ref === 'string' && frame.ref.startsWith('ping') && frame.code === 'invalid_frame') return;
    const error = errorFromFrame(frame, {});
    // Sent just before a close (4429 too_many_connections): the next attempt waits at least this long.
    if (error.details.retryAfterMs !== undefined && this.conn) this.conn.retryAfterMs = error.details.retryAfterMs;
    this.riders.events.emit('error', error);
  }
}
