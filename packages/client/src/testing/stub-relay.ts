import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

/** What a stub connection received and can do: a scripted server for misbehaviour a real realtime never shows. */
export interface StubPeer {
  ws: WebSocket;
  /** The upgrade request's path and query. */
  url: string;
  /** Frames the client sent, parsed. */
  frames: Record<string, unknown>[];
  send(frame: unknown): void;
  /** Resolves with the next client frame of this type (each handed out once). */
  next(type: string, timeoutMs?: number): Promise<Record<string, unknown>>;
}

/**
 * A WebSocket server on 127.0.0.1:0 that runs `onConnection` for every
 * client; `ready` is up to the script.
 */
export class StubRelay {
  readonly peers: StubPeer[] = [];
  private readonly wss: WebSocketServer;
  private waiters: ((p: StubPeer) => void)[] = [];

  private constructor(wss: WebSocketServer, onConnection: (peer: StubPeer, index: number) => void) {
    this.wss = wss;
    wss.on('connection', (ws, req) => {
      const frames: Record<string, unknown>[] = [];
      const taken = new Set<number>();
      let listeners: (() => void)[] = [];
      ws.on('message', (data) => {
        frames.push(JSON.parse(data.toString()) as Record<string, unknown>);
        for (const l of listeners.splice(0)) l();
      });
      const peer: StubPeer = {
        ws,
        url: req.url ?? '',
        frames,
        send: (frame) => ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame)),
        next: (type, timeoutMs = 5000) =>
          new Promise((resolve, reject) => {
            const deadline = setTimeout(() => reject(new Error(`no ${type} frame within ${timeoutMs} ms`)), timeoutMs);
            const look = () => {
              const i = frames.findIndex((f, idx) => !taken.has(idx) && f.type === type);
              if (i < 0) return void listeners.push(look);
              taken.add(i);
              clearTimeout(deadline);
              resolve(frames[i]!);
            };
            look();
          }),
      };
      ws.on('close', () => (listeners = []));
      this.peers.push(peer);
      onConnection(peer, this.peers.length - 1);
      for (const w of this.waiters.splice(0)) w(peer);
    });
  }

  static async start(onConnection: (peer: StubPeer, index: number) => void): Promise<StubRelay> {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    return new StubRelay(wss, onConnection);
  }

  get url(): string {
    return `ws://127.0.0.1:${(this.wss.address() as AddressInfo).port}/ws`;
  }

  /** The connection number `index` (0-based), once it exists. */
  peer(index: number, timeoutMs = 5000): Promise<StubPeer> {
    if (this.peers[index]) return Promise.resolve(this.peers[index]);
    return new Promise((resolve, reject) => {
      const deadline = setTimeout(() => reject(new Error(`connection ${index} did not come within ${timeoutMs} ms`)), timeoutMs);
      const check = () => {
        if (this.peers[index]) {
          clearTimeout(deadline);
          resolve(this.peers[index]);
        } else this.waiters.push(check);
      };
      this.waiters.push(check);
    });
  }

  async stop(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

/** A `ready` frame for a stub connection. */
export function readyFrame(expiresInS = 3600): Record<string, unknown> {
  return { type: 'ready', tenant_id: '00000000-0000-4000-8000-000000000001', user_id: '00000000-0000-4000-8000-000000000002', expires_at: Math.floor(Date.now() / 1000) + expiresInS };
}
