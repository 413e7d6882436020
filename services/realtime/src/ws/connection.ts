import { DEFAULT_CHANNEL_RULES, MAX_DATA_BYTES, RelayError, codeOf, presenceEnabled, skipRepeatedWsEnds, type ChannelAction, type ChannelRules, type ErrorCode, type Logger } from '@service-relay/core';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import type { WebSocket } from 'ws';
import { channelAccess } from '../authz/channel-access';
import { DEFAULT_RULES_LOOKUP, type ChannelRulesLookup } from '../authz/channel-rules-cache';
import { TokenBucket } from '../limits/token-bucket';
import type { TenantSlot } from '../limits/tenant-connections';
import type { MessageBus } from '../messaging/message-bus';
import { applyPublishRule } from '../messaging/publish-rule';
import type { RealtimeMetrics } from '../metrics';
import type { Presence } from '../presence/presence';
import { expiryQueueOf } from '../timers/expiry-queue';
import type { Scheduler } from '../timers/scheduler';
import { checkTopic } from '../topics/topic';
import type { TopicHub } from '../topics/topic-hub';
import { CLOSE_TRY_AGAIN_LATER, CLOSE_UNAUTHORIZED } from './close-codes';
import { parseClientFrame, replyFrame, type ClientFrame, type Ref } from './client-frame';
import type { ConnectionRegistry, TrackedConnection } from './connection-registry';
import { batchFrame, MAX_BATCH_BYTES, type BatchMode } from './batch-frame';
import { socketOf, writeTextFrame } from './server-frame';
import { Subscription, type SubscriptionPresence } from './subscription';

const TEXT = { binary: false } as const;
const CONNECTION = Symbol('connection');

const connectionOf = (ws: WebSocket): Connection => (ws as WebSocket & { [CONNECTION]: Connection })[CONNECTION];

function onMessage(this: WebSocket, data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean): void {
  connectionOf(this).onFrame(isBinary ? undefined : data.toString());
}

function onPong(this: WebSocket): void {
  connectionOf(this).pingedAt = 0;
}

function onClose(this: WebSocket, code: number): void {
  connectionOf(this).onSocketClosed(code);
}

function onError(this: WebSocket, err: Error): void {
  connectionOf(this).onSocketError(err);
}

/** What every connection of a server shares. */
export interface ConnectionContext {
  hub: TopicHub;
  messages: MessageBus;
  registry: ConnectionRegistry;
  scheduler: Scheduler;
  metrics: RealtimeMetrics;
  logger: Logger;
  maxSubscriptions: number;
  maxBufferedBytes: number;
  /** PUBLISH_RATE_PER_S and PUBLISH_BURST; default: unlimited (tests that do not care). */
  publishRate?: { ratePerS: number; burst: number };
  /** AUTH_FRAMES_PER_MINUTE; default: the constant AUTH_FRAMES_PER_MINUTE below. */
  authFramesPerMinute?: number;
  /** False while this instance must not take publishes (refused with `unavailable`); default: always true. */
  acceptingPublishes?: () => boolean;
  /**
   * FeedCutoff.serving: false while this instance cannot vouch for its
   * connections, which it then closes (1013); nothing is delivered or acted
   * on meanwhile. Default: always true.
   */
  serving?: () => boolean;
  /** The tenant's channel rules (ChannelRulesCache.lookup); default: the default rules for every tenant. */
  channelRules?: ChannelRulesLookup;
  /** Presence (#13 item 3); absent: no channel has presence here. */
  presence?: Presence;
  /** Every connection whose socket is not yet closed (ping and shutdown); each adds and removes itself. */
  live?: Set<Connection>;
}

const ALWAYS = () => true;
/** Only read by unsubscribe, which no rule limits. */
const DEFAULT_RULES = DEFAULT_CHANNEL_RULES;

interface PresenceJoin {
  watching: boolean;
  dataJson: string | undefined;
}

/**
 * `auth` frames a connection may send per minute, unless AUTH_FRAMES_PER_MINUTE
 * says otherwise. A client refreshes once per token lifetime (minutes at
 * least); a few retries on top fit easily. Each frame costs a verifier call,
 * so the bound is what keeps one connection from starving everyone else's
 * upgrades.
 */
export const AUTH_FRAMES_PER_MINUTE = 10;
const AUTH_WINDOW_MS = 60_000;

/** One authenticated WebSocket: its identity, token expiry, subscriptions and frames. */
export class Connection implements TrackedConnection {
  /** Created on the first subscribe: most of an idle connection's memory is fixed cost. */
  private subscriptions: Map<string, Subscription> | undefined;
  /** The token expiry armed in the scheduler's shared queue (s, an integer kept unboxed); undefined when not armed. */
  private armedExpiry: number | undefined;
  private closeCode: number | undefined;
  /** A flush of this tick's frames (and the socket's uncork) is scheduled. */
  private tickPending = false;
  /** Frames held for this tick's `batch` frame (batching connections only). */
  private held: Array<Buffer | string> | undefined;
  private heldBytes = 0;
  /** One refresh at a time: a second `auth` while one is being checked is refused. */
  private refreshing = false;
  private authWindowStart = 0;
  private authFrames = 0;
  /** Created on the first publish, like the subscriptions. */
  private publishBucket: TokenBucket | undefined;
  /** This connection's presence membership id, made on its first presence subscribe. */
  private presenceId: string | undefined;
  /** The ping sweep's step of the ping not answered yet, 0 once answered (ws/ping-sweep.ts). */
  pingedAt = 0;

  constructor(
    private readonly ws: WebSocket,
    public identity: VerifiedIdentity,
    public token: string,
    private readonly ctx: ConnectionContext,
    /** The tenant connection slot, given back when the socket closes. */
    private readonly slot?: TenantSlot,
    /** The `batch` frames the client asked for (`/ws?batch=1`, compact ones with `batch=2`). */
    private readonly batching: BatchMode = 'none',
  ) {
    // Shared listeners that find their connection on the socket: four closures
    // per connection would cost more than the connection's own state.
    (ws as WebSocket & { [CONNECTION]: Connection })[CONNECTION] = this;
    ws.on('message', onMessage);
    ws.on('pong', onPong);
    ws.on('close', onClose);
    ws.on('error', onError);
    // Every close of it, from either side, ends the socket and ws's parser again: free from here on.
    skipRepeatedWsEnds(ws);
    ctx.registry.add(this);
    ctx.live?.add(this);
    this.armExpiry();
    this.send(replyFrame({ type: 'ready', tenant_id: identity.tenantId, user_id: identity.userId, expires_at: identity.expiresAt }, undefined));
  }

  /** The socket closed, from either side. */
  onSocketClosed(code: number): void {
    // First, so the slot is free before anything else sees the close.
    this.slot?.release();
    this.ctx.live?.delete(this);
    // Closes this side chose were counted when it chose them.
    if (this.closeCode === undefined) this.ctx.metrics.closed(code);
    this.cleanUp();
  }

  onSocketError(err: Error): void {
    this.ctx.logger.debug({ err: err.message, tenant_id: this.identity.tenantId }, 'websocket error');
  }

  close(code: number, reason: string): void {
    if (this.closeCode !== undefined) return;
    // What this tick already owed the client goes before the close frame.
    this.flushHeld();
    this.closeCode = code;
    this.ctx.metrics.closed(code);
    this.cleanUp();
    this.ws.close(code, reason);
    // Half-close right behind the close frame instead of after the client's
    // close reply: the client completes the handshake (its reply, its FIN)
    // without waiting for this process to read that reply, which a disable
    // of 10,000 connections queued behind 10,000 others (bench/README.md
    // "Scale"). Reading stays open, so the reply is still read and the
    // socket closes at the client's FIN (or ws's close timer).
    socketOf(this.ws)?.end();
  }

  /** Closes and resolves once the peer answered (or after a grace period, cut hard). */
  shutdown(code: number, graceMs: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.ws.readyState === this.ws.CLOSED) return resolve();
      const timer = setTimeout(() => this.ws.terminate(), graceMs);
      this.ws.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.close(code, 'server shutting down');
    });
  }

  confirm(identity: VerifiedIdentity): void {
    this.identity = identity;
  }

  sendPing(): void {
    this.ws.ping();
  }

  dropSilent(): void {
    if (this.closeCode === undefined) {
      this.closeCode = 1006;
      this.ctx.metrics.closed(1006);
    }
    this.ws.terminate();
  }

  /**
   * A `message` (or presence event) frame. On a batching connection the
   * frames of one tick go out together, as one `batch` frame when there are
   * several. A consumer that lets its send buffer grow past the bound is dropped.
   */
  sendMessage(frame: Buffer | string): void {
    if (this.closeCode !== undefined) return;
    this.flushAtEndOfTick();
    if (this.batching === 'none') return this.write(frame);
    (this.held ??= []).push(frame);
    this.heldBytes += frame.length;
    if (this.heldBytes >= MAX_BATCH_BYTES) this.flushHeld();
  }

  private write(frame: Buffer | string): void {
    if (typeof frame === 'string' || !writeTextFrame(this.ws, frame)) this.ws.send(frame, TEXT);
    if (this.ws.bufferedAmount > this.ctx.maxBufferedBytes) {
      this.ctx.logger.info({ tenant_id: this.identity.tenantId, buffered: this.ws.bufferedAmount }, 'dropping a slow consumer');
      this.close(CLOSE_TRY_AGAIN_LATER, 'slow consumer');
      // Its buffer will not drain soon enough for a close handshake.
      setTimeout(() => this.ws.terminate(), 1000).unref();
    }
  }

  private flushHeld(): void {
    const held = this.held;
    if (!held) return;
    this.held = undefined;
    this.heldBytes = 0;
    if (this.closeCode !== undefined) return;
    this.write(held.length === 1 ? held[0]! : batchFrame(held, this.batching === 'compact'));
  }

  /**
   * Frames sent in one tick (a burst of messages arrives in one read from
   * Redis or from a publisher) leave in one socket write instead of one each:
   * the socket is corked until the next tick, when held frames are flushed.
   */
  private flushAtEndOfTick(): void {
    if (this.tickPending) return;
    this.tickPending = true;
    const socket = socketOf(this.ws);
    socket?.cork();
    process.nextTick(() => {
      this.tickPending = false;
      this.flushHeld();
      socket?.uncork();
    });
  }

  private send(text: string): void {
    // Replies keep their place after the frames held for this tick.
    this.flushHeld();
    if (this.closeCode === undefined) this.ws.send(text);
  }

  private error(code: ErrorCode, ref: Ref | undefined, extra: Record<string, unknown> = {}): void {
    this.send(replyFrame({ type: 'error', code, ...extra }, ref));
  }

  /** An error frame for a refusal by a limit, which names its number (docs/API.md "Limits"). */
  private refuse(limit: string, code: ErrorCode, ref: Ref | undefined, extra: { limit: number; retry_after_ms?: number }): void {
    this.ctx.metrics.limitRefusals.inc({ limit });
    this.error(code, ref, extra);
  }

  /** A frame from the client (undefined: a binary frame). */
  onFrame(text: string | undefined): void {
    // Closed by this side (revoked, expired, dropped): ws still hands over the
    // frames the client sent before it read the close frame; none is acted on.
    if (this.closeCode !== undefined) return;
    // An instance cut off from the tenant feed acts on nothing (and has closed this connection).
    if (!this.serving()) return;
    const parsed = text === undefined ? ({ ok: false, ref: undefined } as const) : parseClientFrame(text);
    if (!parsed.ok) return this.error('invalid_frame', parsed.ref);
    this.handle(parsed.frame).catch((err: unknown) => {
      const code = codeOf(err);
      if (code === 'internal') this.ctx.logger.error({ err, tenant_id: this.identity.tenantId }, 'frame handling failed');
      this.error(code, parsed.frame.ref);
    });
  }

  private async handle(frame: ClientFrame): Promise<void> {
    if (frame.type === 'auth') return this.refresh(frame.token, frame.ref);
    if (frame.type === 'ping') return this.send(replyFrame({ type: 'pong' }, frame.ref));
    // Before any other check: a refused frame costs the server as little as possible.
    if (frame.type === 'publish' && this.ctx.publishRate) {
      const { ratePerS, burst } = this.ctx.publishRate;
      const taken = (this.publishBucket ??= new TokenBucket(ratePerS, burst, this.ctx.scheduler)).take();
      if (!taken.ok) return this.refuse('publish_rate', 'rate_limited', frame.ref, { limit: ratePerS, retry_after_ms: taken.retryAfterMs });
    }
    const topic = checkTopic(frame.topic, this.identity.tenantId);
    if (!topic.ok) return this.error(topic.code, frame.ref);
    const name = frame.topic as string;
    let rules: ChannelRules = DEFAULT_RULES;
    if (frame.type !== 'unsubscribe') {
      // Known rules decide at once (no await on a publish); rules that must be asked for and cannot be refuse the frame with `unavailable`.
      const lookup = (this.ctx.channelRules ?? DEFAULT_RULES_LOOKUP)(this.identity.tenantId);
      rules = lookup instanceof Promise ? await lookup : lookup;
      // Closed while the rules were fetched: nothing more for this connection.
      if (this.closeCode !== undefined) return;
      if (!this.may(rules, topic.ref.channel, frame.type)) return this.error('forbidden_channel', frame.ref);
    }
    if (frame.type === 'presence') return this.listPresence(name, topic.ref, rules, frame.ref);
    if (frame.type === 'subscribe') return this.subscribe(name, topic.ref, frame.after, frame.epoch, frame.ref, this.presenceOf(rules, topic.ref.channel, frame.member));
    if (frame.type === 'unsubscribe') {
      const sub = this.subscriptions?.get(name);
      if (sub) this.drop(sub);
      return this.send(replyFrame({ type: 'unsubscribed', topic: name }, frame.ref));
    }
    const deps = { messages: this.ctx.messages, acceptingPublishes: this.ctx.acceptingPublishes ?? ALWAYS };
    const verdict = await applyPublishRule(deps, { ref: topic.ref, userId: this.identity.userId, data: frame.data, idempotencyKey: frame.idempotencyKey });
    if (!verdict.ok) {
      if (verdict.refusal === 'payload_too_large') return this.refuse('payload_size', 'payload_too_large', frame.ref, { limit: MAX_DATA_BYTES });
      return this.error(verdict.refusal === 'malformed' ? 'invalid_frame' : verdict.refusal, frame.ref);
    }
    this.ctx.metrics.messagesIn.inc({ source: 'ws' });
    this.send(replyFrame({ type: 'published', topic: name, id: verdict.message.id }, frame.ref));
  }

  /**
   * Decided with the tenant's rules and the current token's cap: new rules
   * or a refresh with a narrower cap apply to requests after them;
   * subscriptions already live stay (not re-checked retroactively).
   * Unsubscribe is always allowed.
   */
  private may(rules: ChannelRules, channel: string, action: ChannelAction): boolean {
    return channelAccess(rules, this.identity.cap, this.identity.userId, channel, action) === 'allow';
  }

  /**
   * `subscribed` carries the channel's epoch and, with `after`, whether
   * everything after it could be recovered; it precedes every replayed message.
   */
  private async subscribe(
    name: string,
    ref: Subscription['ref'],
    after: string | undefined,
    epoch: string | undefined,
    frameRef: Ref | undefined,
    presence: PresenceJoin | undefined,
  ): Promise<void> {
    const subscriptions = (this.subscriptions ??= new Map());
    if (subscriptions.has(name)) {
      // Already live: no replay, so nothing to recover.
      const current = await this.ctx.messages.epoch(ref);
      return this.send(replyFrame({ type: 'subscribed', topic: name, epoch: current }, frameRef));
    }
    if (subscriptions.size >= this.ctx.maxSubscriptions) return this.refuse('subscriptions', 'too_many_subscriptions', frameRef, { limit: this.ctx.maxSubscriptions });
    const sub = new Subscription(name, ref, this);
    subscriptions.set(name, sub);
    try {
      await this.ctx.hub.join(name, ref, sub);
      if (sub.cancelled) return;
      // A member (and watching, when allowed) before `subscribed`: the reply means the others can see it.
      if (presence) await this.joinPresence(sub, presence);
      if (sub.cancelled) return;
      if (after === undefined) {
        const current = await this.ctx.messages.epoch(ref);
        if (sub.cancelled) return;
        this.send(replyFrame({ type: 'subscribed', topic: name, epoch: current }, frameRef));
      } else {
        const replayed = await sub.replay(
          this.ctx.messages,
          after,
          epoch,
          (first) => {
            if (first.recovery) this.ctx.metrics.recovery('ws', first.recovery);
            this.send(replyFrame({ type: 'subscribed', topic: name, epoch: first.epoch, ...first.recovery }, frameRef));
          },
          this.serving,
        );
        this.ctx.metrics.messagesOut.inc(replayed);
      }
      // What was held meanwhile goes out only while this instance still vouches for the connection (else it is closed now).
      if (!this.serving()) return;
      sub.goLive();
    } catch (err) {
      // Without its history the subscription would have a gap: take it back.
      this.drop(sub);
      throw err instanceof RelayError ? err : new RelayError('unavailable', 'subscribe failed', { cause: err });
    }
  }

  private drop(sub: Subscription): void {
    sub.cancelled = true;
    if (this.subscriptions?.get(sub.topic) === sub) this.subscriptions.delete(sub.topic);
    this.ctx.hub.leave(sub.topic, sub);
    const p = sub.presence;
    if (p && this.ctx.presence) {
      this.ctx.presence.leave(sub.ref, this.presenceId!, p.joined);
      if (p.watching) this.ctx.presence.unwatch(sub.topic, sub);
    }
  }

  /** Subscribers of a presence channel are members; those the rules and cap give `presence` also see joins and leaves. */
  private presenceOf(rules: ChannelRules, channel: string, dataJson: string | undefined): PresenceJoin | undefined {
    if (!this.ctx.presence || !presenceEnabled(rules, channel)) return undefined;
    return { watching: this.may(rules, channel, 'presence'), dataJson };
  }

  private async joinPresence(sub: Subscription, join: PresenceJoin): Promise<void> {
    const presence = this.ctx.presence!;
    const id = (this.presenceId ??= presence.connectionId());
    const state: SubscriptionPresence = { watching: join.watching, joined: false };
    sub.presence = state;
    if (join.watching) await presence.watch(sub.topic, sub.ref, sub, this);
    if (sub.cancelled) return;
    await presence.join(sub.ref, id, this.identity.userId, join.dataJson);
    state.joined = true;
    // Dropped while the join was in flight: its leave found nothing yet.
    if (sub.cancelled) presence.leave(sub.ref, id, true);
  }

  /** The `presence` request: the members of a presence channel, on every instance, sorted by user_id. */
  private async listPresence(name: string, ref: Subscription['ref'], rules: ChannelRules, frameRef: Ref | undefined): Promise<void> {
    if (!this.ctx.presence || !presenceEnabled(rules, ref.channel)) return this.error('presence_not_enabled', frameRef);
    const members = await this.ctx.presence.list(ref);
    if (!this.serving()) return;
    this.send(replyFrame({ type: 'presence', topic: name, members }, frameRef));
  }

  private get serving(): () => boolean {
    return this.ctx.serving ?? ALWAYS;
  }

  private async refresh(token: string, ref: Ref | undefined): Promise<void> {
    // One in flight: the limit is the pending check, which ends with its own reply.
    if (this.refreshing) return this.refuse('auth_frames', 'rate_limited', ref, { limit: 1 });
    const perMinute = this.ctx.authFramesPerMinute ?? AUTH_FRAMES_PER_MINUTE;
    if (!this.takeAuthFrame(perMinute)) {
      return this.refuse('auth_frames', 'rate_limited', ref, { limit: perMinute, retry_after_ms: Math.max(1, this.authWindowStart + AUTH_WINDOW_MS - this.ctx.scheduler.now()) });
    }
    this.refreshing = true;
    const result = await this.ctx.registry
      .verifyFresh(token, 'refresh')
      .catch((err: unknown) => err as RelayError)
      .finally(() => (this.refreshing = false));
    if (this.closeCode !== undefined) return;
    if (result instanceof Error) return this.error(codeOf(result), ref);
    if (!result.valid) return this.error('invalid_or_missing_token', ref);
    const next = result.identity;
    if (next.tenantId !== this.identity.tenantId || next.userId.toLowerCase() !== this.identity.userId.toLowerCase()) {
      return this.error('identity_mismatch', ref);
    }
    // verifyFresh judged it fresh and nothing yielded since; asked again so a later edit cannot open a gap.
    if (!this.ctx.registry.isFresh(next)) return this.error('auth_unavailable', ref);
    this.identity = next;
    this.token = token;
    this.armExpiry();
    this.send(replyFrame({ type: 'authenticated', expires_at: next.expiresAt }, ref));
  }

  /** Fixed one-minute windows on the scheduler's clock. */
  private takeAuthFrame(perMinute: number): boolean {
    const now = this.ctx.scheduler.now();
    if (now - this.authWindowStart >= AUTH_WINDOW_MS) {
      this.authWindowStart = now;
      this.authFrames = 0;
    }
    if (this.authFrames >= perMinute) return false;
    this.authFrames++;
    return true;
  }

  private armExpiry(): void {
    this.cancelExpiry();
    this.armedExpiry = this.identity.expiresAt;
    expiryQueueOf(this.ctx.scheduler).add(this, this.armedExpiry * 1000);
  }

  private cancelExpiry(): void {
    if (this.armedExpiry !== undefined) expiryQueueOf(this.ctx.scheduler).delete(this, this.armedExpiry * 1000);
    this.armedExpiry = undefined;
  }

  /** The token ran out (the shared expiry queue calls this). */
  expire(): void {
    this.armedExpiry = undefined;
    this.close(CLOSE_UNAUTHORIZED, 'token expired');
  }

  private cleanUp(): void {
    this.cancelExpiry();
    if (this.subscriptions) for (const sub of [...this.subscriptions.values()]) this.drop(sub);
    this.ctx.registry.remove(this);
  }
}
