import { codeOf, skipRepeatedWsEnds, type ErrorCode } from '@service-relay/core';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';
import type { TenantSlot } from '../limits/tenant-connections';
import { expiryQueueOf } from '../timers/expiry-queue';
import { batchFrame, MAX_BATCH_BYTES, type BatchMode } from './batch-frame';
import { ChannelFrames } from './channel-frames';
import { CLOSE_TRY_AGAIN_LATER, CLOSE_UNAUTHORIZED } from './close-codes';
import { parseClientFrame, replyFrame, type ClientFrame, type Ref } from './client-frame';
import { ALWAYS, type ConnectionContext, type FrameConnection, type LiveConnection } from './connection-context';
import type { TrackedConnection } from './connection-registry';
import { socketOf, writeTextFrame } from './server-frame';
import { flushAtEndOfTick, type TickFlushable } from './tick-flush';
import { TokenRefresh } from './token-refresh';
import type { TenantUsage } from '@service-relay/core';

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

/**
 * One authenticated WebSocket: the socket, its frame loop and what it is
 * sent, its identity and token expiry. Channel frames (ws/channel-frames.ts)
 * and token refresh (ws/token-refresh.ts) are handled elsewhere, on state
 * made when first needed.
 */
export class Connection implements TrackedConnection, FrameConnection, LiveConnection, TickFlushable {
  /** Subscriptions, publishes and presence; made on the first such frame. */
  private channels: ChannelFrames | undefined;
  /** `auth` frames; made on the first one. */
  private refresher: TokenRefresh | undefined;
  /** The token expiry armed in the scheduler's shared queue (s, an integer kept unboxed); undefined when not armed. */
  private armedExpiry: number | undefined;
  private closeCode: number | undefined;
  /** A flush of this tick's frames (and the socket's uncork) is scheduled. */
  private tickPending = false;
  /** The socket corked for this tick (connections without batches only). */
  private corked: Socket | undefined;
  /** Frames held for this tick's `batch` frame (batching connections only). */
  private held: Array<Buffer | string> | undefined;
  private heldBytes = 0;
  /** The ping sweep's step of the ping not answered yet, 0 once answered (ws/ping-sweep.ts). */
  pingedAt = 0;
  /** The tenant's usage counters while the connection is open (#30). */
  usage: TenantUsage | undefined;

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
    this.usage = ctx.usage?.connected(identity.tenantId);
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

  get closed(): boolean {
    return this.closeCode !== undefined;
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

  renew(identity: VerifiedIdentity, token: string): void {
    this.identity = identity;
    this.token = token;
    this.armExpiry();
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
  sendMessage(frame: Buffer | string, message = false): void {
    if (this.closeCode !== undefined) return;
    const usage = this.usage;
    if (message && usage) {
      usage.deliveries += 1;
      usage.bytesOut += typeof frame === 'string' ? Buffer.byteLength(frame) : frame.length;
    }
    if (!this.tickPending) this.holdTick();
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
   * a batching connection holds them for one `batch` frame; any other has its
   * socket corked until the flush. Every connection's flush runs on one
   * shared end-of-tick pass (ws/tick-flush.ts).
   */
  private holdTick(): void {
    this.tickPending = true;
    if (this.batching === 'none') {
      this.corked = socketOf(this.ws);
      this.corked?.cork();
    }
    flushAtEndOfTick(this);
  }

  /** End of the tick: the held frames go out (tick-flush.ts calls this). */
  flushTick(): void {
    this.tickPending = false;
    this.flushHeld();
    const corked = this.corked;
    this.corked = undefined;
    corked?.uncork();
  }

  send(text: string): void {
    // Replies keep their place after the frames held for this tick.
    this.flushHeld();
    if (this.closeCode === undefined) this.ws.send(text);
  }

  error(code: ErrorCode, ref: Ref | undefined, extra: Record<string, unknown> = {}): void {
    this.send(replyFrame({ type: 'error', code, ...extra }, ref));
  }

  refuse(limit: string, code: ErrorCode, ref: Ref | undefined, extra: { limit: number; retry_after_ms?: number }): void {
    this.ctx.metrics.limitRefusals.inc({ limit });
    this.ctx.refusals?.refused(this.identity.tenantId, limit);
    this.error(code, ref, extra);
  }

  get serving(): () => boolean {
    return this.ctx.serving ?? ALWAYS;
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
    if (frame.type === 'auth') return (this.refresher ??= new TokenRefresh(this, this.ctx)).refresh(frame.token, frame.ref);
    if (frame.type === 'ping') return this.send(replyFrame({ type: 'pong' }, frame.ref));
    return (this.channels ??= new ChannelFrames(this, this.ctx)).handle(frame);
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
    this.channels?.dropAll();
    this.ctx.registry.remove(this);
    if (this.usage) {
      this.ctx.usage?.disconnected(this.usage);
      this.usage = undefined;
    }
  }
}
