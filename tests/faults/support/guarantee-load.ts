import { randomUUID } from 'node:crypto';
import { WebSocket } from 'ws';
import { signWithJose } from '../../support/host';
import type { FaultStack } from './fault-stack';

/**
 * Concurrent load of one target tenant for the "no verdict outlives a change
 * it preceded" check (issue #28, item 1): loops of tokens through both
 * gateways (GET /api/v1/me, REST publishes) and WebSocket upgrades on both
 * realtime instances, directly and through each gateway's /ws. Every
 * request and upgrade is recorded with its send and answer times and its
 * status; every upgraded socket publishes until it is closed, and every
 * publish is recorded with its send time and outcome. The test judges the
 * records afterwards (guarantee-judge.ts).
 */

/** The tenant's signing secret as the host knows it; `gen` goes up with each revoke_all. */
export interface TargetTenant {
  id: string;
  secret: string;
  gen: number;
}

export interface PublishRecord {
  sentAt: number;
  /** When `published` came back (the publish was acknowledged). */
  ackAt?: number;
  /** The error frame's code, or closed/timeout. */
  refused?: string;
}

export interface SocketRecord {
  /** When the 101 arrived. */
  upgradedAt: number;
  closeCode?: number;
  closedAt?: number;
  /** Closed by this client (hold over), not by the server. */
  closedByClient: boolean;
  publishes: PublishRecord[];
}

export interface Attempt {
  kind: 'me' | 'publish' | 'upgrade';
  /** gateway1, gateway2, realtime1, realtime2, gateway1/ws, gateway2/ws. */
  via: string;
  tenantId: string;
  gen: number;
  /** A token never sent before (else one from the recent pool, possibly cached). */
  fresh: boolean;
  sentAt: number;
  answeredAt: number;
  /** HTTP status (101 for an upgrade); 0 when no answer came. */
  status: number;
  socket?: SocketRecord;
}

export interface LoadShape {
  /** HTTP loops: loop i uses gateway i % gateways, alternating /me and REST publishes. */
  httpLoops: number;
  /** WebSocket loops: loop j upgrades on path j % 4 (realtime1, realtime2, gateway1/ws, gateway2/ws). */
  wsLoops: number;
  /** Pause between two requests of one loop (bounds the load on a shared 2-core machine). */
  pauseMs: number;
  /** How long an upgraded loop socket stays open (publishing) unless the server closes it first. */
  holdMs: number;
  /** Interval between two publishes on an open socket. */
  publishEveryMs: number;
}

const POOL_SIZE = 48;
const REQUEST_TIMEOUT_MS = 5000;

export class GuaranteeLoad {
  readonly attempts: Attempt[] = [];
  /** Sockets opened by the test itself (the tenant's live connections before a call). */
  readonly live: Array<{ gen: number; tenantId: string; via: string; sentAt: number; socket: SocketRecord }> = [];
  /** Loop sockets are not closed by this client before this time (so a close by the server can be seen). */
  holdOpenUntil = 0;
  private stopped = false;
  private loops: Array<Promise<void>> = [];
  private readonly sockets = new Set<WebSocket>();
  private readonly liveSockets = new Set<WebSocket>();
  private pool: Array<{ token: string; gen: number }> = [];
  private readonly deadline: number;

  constructor(
    private readonly stack: FaultStack,
    private readonly target: TargetTenant,
    private readonly shape: LoadShape,
    maxMs: number,
  ) {
    this.deadline = Date.now() + maxMs;
  }

  private get running(): boolean {
    return !this.stopped && Date.now() < this.deadline;
  }

  /** A token of the target tenant: half the time a fresh one, else one from the recent pool of the current secret. */
  async token(): Promise<{ token: string; gen: number; fresh: boolean }> {
    const gen = this.target.gen;
    const pooled = this.pool.filter((p) => p.gen === gen);
    if (pooled.length > 0 && Math.random() < 0.5) {
      const p = pooled[Math.floor(Math.random() * pooled.length)]!;
      return { token: p.token, gen, fresh: false };
    }
    const token = await signWithJose(this.target.secret, this.target.id, randomUUID(), 900);
    this.pool.push({ token, gen });
    if (this.pool.length > POOL_SIZE) this.pool.splice(0, this.pool.length - POOL_SIZE);
    return { token, gen, fresh: true };
  }

  /** Forgets pooled tokens (after a revoke_all the pool refills with the new secret's). */
  resetPool(): void {
    this.pool = [];
  }

  start(): void {
    const gw = this.stack.gatewayUrls;
    for (let i = 0; i < this.shape.httpLoops; i++) this.loops.push(this.httpLoop(gw[i % gw.length]!, i % gw.length, i));
    const wsPaths = [
      ['realtime1', this.stack.realtimeWs[0]],
      ['realtime2', this.stack.realtimeWs[1]],
      ...gw.map((u, k) => [`gateway${k + 1}/ws`, `${u.replace(/^http/, 'ws')}/ws`]),
    ] as Array<[string, string]>;
    for (let j = 0; j < this.shape.wsLoops; j++) this.loops.push(this.wsLoop(...wsPaths[j % wsPaths.length]!));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
    for (const ws of this.sockets) ws.terminate();
    this.sockets.clear();
  }

  private async httpLoop(base: string, gwIndex: number, i: number): Promise<void> {
    for (let n = 0; n < 100_000 && this.running; n++) {
      const kind = (n + i) % 2 === 0 ? 'me' : 'publish';
      const { token, gen, fresh } = await this.token();
      const sentAt = Date.now();
      let status = 0;
      try {
        const res = kind === 'me'
          ? await fetch(`${base}/api/v1/me`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
          : await fetch(`${base}/api/v1/channels/guarantee/messages`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ data: { n } }),
            signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
          });
        await res.arrayBuffer();
        status = res.status;
      } catch {
        status = 0;
      }
      this.attempts.push({ kind, via: `gateway${gwIndex + 1}`, tenantId: this.target.id, gen, fresh, sentAt, answeredAt: Date.now(), status });
      await pause(this.shape.pauseMs);
    }
  }

  private async wsLoop(via: string, url: string): Promise<void> {
    for (let n = 0; n < 100_000 && this.running; n++) {
      const { token, gen, fresh } = await this.token();
      const a: Attempt = { kind: 'upgrade', via, tenantId: this.target.id, gen, fresh, sentAt: Date.now(), answeredAt: 0, status: 0 };
      this.attempts.push(a);
      const ws = await this.upgrade(url, token, a);
      if (ws) await this.holdAndPublish(ws, a.socket!, () => Math.max(a.socket!.upgradedAt + this.shape.holdMs, this.holdOpenUntil));
      await pause(this.shape.pauseMs);
    }
  }

  /** Opens a socket of the tenant for the test (a live connection before the call); resolves once it is ready. */
  async openLive(via: string, url: string): Promise<SocketRecord> {
    const { token, gen } = await this.token();
    const a: Attempt = { kind: 'upgrade', via, tenantId: this.target.id, gen, fresh: true, sentAt: Date.now(), answeredAt: 0, status: 0 };
    const ws = await this.upgrade(url, token, a);
    if (!ws || a.status !== 101) throw new Error(`live connection on ${via} not opened: ${a.status}`);
    this.live.push({ gen, tenantId: a.tenantId, via, sentAt: a.sentAt, socket: a.socket! });
    this.liveSockets.add(ws);
    // Publishes until the server closes it (bounded: the test's own deadline).
    void this.holdAndPublish(ws, a.socket!, () => (this.running ? Date.now() + 1000 : 0));
    return a.socket!;
  }

  /** Loop sockets upgraded by `at` and still open (not yet closed by the server nor by this client). */
  loopSocketsOpenSince(at: number): number {
    return this.attempts.filter((a) => a.socket !== undefined && a.socket.upgradedAt <= at && a.socket.closeCode === undefined).length;
  }

  /** Closes the test's live connections still open (the next round opens new ones). */
  closeLive(): void {
    for (const l of this.live) {
      if (l.socket.closeCode === undefined) l.socket.closedByClient = true;
    }
    for (const ws of this.liveSockets) ws.terminate();
    this.liveSockets.clear();
  }

  /** Upgrades; records the 101 or the refusal. Resolves with the socket once `ready` came (undefined if refused or closed first). */
  private upgrade(url: string, token: string, a: Attempt): Promise<WebSocket | undefined> {
    return new Promise((resolve) => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, handshakeTimeout: REQUEST_TIMEOUT_MS });
      this.sockets.add(ws);
      let settled = false;
      const done = (v: WebSocket | undefined) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(v);
      };
      const timer = setTimeout(() => {
        ws.terminate();
        done(undefined);
      }, REQUEST_TIMEOUT_MS + 1000);
      ws.once('upgrade', () => {
        a.answeredAt = Date.now();
        a.status = 101;
        a.socket = { upgradedAt: a.answeredAt, closedByClient: false, publishes: [] };
      });
      ws.once('unexpected-response', (_req, res) => {
        a.answeredAt = Date.now();
        a.status = res.statusCode ?? 0;
        res.resume();
        ws.terminate();
        done(undefined);
      });
      ws.once('error', () => {
        if (!a.answeredAt) a.answeredAt = Date.now();
        done(undefined);
      });
      ws.once('close', (code) => {
        this.sockets.delete(ws);
        if (a.socket && a.socket.closeCode === undefined) {
          a.socket.closeCode = code;
          a.socket.closedAt = Date.now();
        }
        done(undefined);
      });
      ws.on('message', (data) => {
        let f: { type?: string; ref?: string; code?: string };
        try {
          f = JSON.parse(String(data)) as typeof f;
        } catch {
          return;
        }
        if (f.type === 'ready') done(ws);
        const p = f.ref?.startsWith('g') ? a.socket?.publishes[Number(f.ref.slice(1))] : undefined;
        if (p && f.type === 'published') p.ackAt = Date.now();
        else if (p && f.type === 'error') p.refused = f.code ?? 'error';
      });
    });
  }

  /** Publishes every publishEveryMs while the socket is open, until `holdUntil()` (then closes it from this side). */
  private async holdAndPublish(ws: WebSocket, s: SocketRecord, holdUntil: () => number): Promise<void> {
    for (let k = 0; k < 1000 && s.closeCode === undefined && this.running; k++) {
      if (Date.now() >= holdUntil()) break;
      const ref = `g${s.publishes.length}`;
      s.publishes.push({ sentAt: Date.now() });
      try {
        ws.send(JSON.stringify({ type: 'publish', topic: `tenants/${this.target.id}/channels/guarantee`, data: { k }, ref }));
      } catch {
        break;
      }
      await pause(this.shape.publishEveryMs);
    }
    if (s.closeCode === undefined) {
      s.closedByClient = true;
      ws.terminate();
    }
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
