import { WebSocket } from 'ws';

export type Frame = Record<string, unknown> & { type: string };
type Predicate = (f: Frame) => boolean;

export interface UpgradeRefusal {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * A WebSocket client for tests: records every frame and lets a test await the
 * next frame matching a predicate (each frame is handed out once).
 */
export class WsTestClient {
  readonly frames: Frame[] = [];
  private readonly taken = new Set<number>();
  private waiters: { pred: Predicate; resolve: (f: Frame) => void }[] = [];
  private conditions: { cond: () => boolean; resolve: () => void }[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const frame = JSON.parse(data.toString()) as Frame;
      const index = this.frames.push(frame) - 1;
      const w = this.waiters.find((x) => x.pred(frame));
      if (w) {
        this.taken.add(index);
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve(frame);
      }
      const met = this.conditions.filter((c) => c.cond());
      this.conditions = this.conditions.filter((c) => !met.includes(c));
      for (const c of met) c.resolve();
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  /** Connects and waits for `ready`. `token` goes in the header unless `via: 'query'`. */
  static async connect(url: string, token: string, opts: { via?: 'header' | 'query'; scheme?: string; autoPong?: boolean } = {}): Promise<WsTestClient> {
    const target = opts.via === 'query' ? `${url}?access_token=${encodeURIComponent(token)}` : url;
    const headers = opts.via === 'query' ? {} : { authorization: `${opts.scheme ?? 'Bearer'} ${token}` };
    const ws = new WebSocket(target, { headers, autoPong: opts.autoPong ?? true });
    const client = new WsTestClient(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
    });
    await client.next('ready');
    return client;
  }

  /** Attempts an upgrade that is expected to be refused, and returns the HTTP answer. */
  static refusal(url: string, headers: Record<string, string> = {}): Promise<UpgradeRefusal> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers });
      ws.once('open', () => {
        ws.terminate();
        reject(new Error('upgrade was accepted'));
      });
      ws.once('error', () => {});
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
    });
  }

  send(frame: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The first frame not yet handed out that matches (a type name or a predicate). */
  next(match: string | Predicate, timeoutMs = 5000): Promise<Frame> {
    const pred: Predicate = typeof match === 'string' ? (f) => f.type === match : match;
    const i = this.frames.findIndex((f, idx) => !this.taken.has(idx) && pred(f));
    if (i >= 0) {
      this.taken.add(i);
      return Promise.resolve(this.frames[i]!);
    }
    return new Promise((resolve, reject) => {
      const waiter = { pred, resolve };
      this.waiters.push(waiter);
      setTimeout(() => {
        if (!this.waiters.includes(waiter)) return;
        this.waiters = this.waiters.filter((x) => x !== waiter);
        reject(new Error(`no frame matching ${typeof match === 'string' ? match : 'predicate'} within ${timeoutMs} ms; got ${JSON.stringify(this.frames.slice(-5))}`));
      }, timeoutMs).unref();
    });
  }

  /** Sends a frame with a ref and awaits the reply carrying that ref. */
  async request(frame: Record<string, unknown>, timeoutMs?: number): Promise<Frame> {
    const ref = `r${Math.random().toString(36).slice(2)}`;
    this.send({ ...frame, ref });
    return this.next((f) => f.ref === ref, timeoutMs);
  }

  /** Message frames of a topic received so far, in arrival order. */
  messages(topic: string): Frame[] {
    return this.frames.filter((f) => f.type === 'message' && f.topic === topic);
  }

  /** Resolves once `n` message frames of `topic` have arrived. */
  async waitForMessages(topic: string, n: number, timeoutMs = 10_000): Promise<Frame[]> {
    const cond = () => this.messages(topic).length >= n;
    if (!cond()) {
      await new Promise<void>((resolve, reject) => {
        const entry = { cond, resolve };
        this.conditions.push(entry);
        setTimeout(() => {
          if (!this.conditions.includes(entry)) return;
          this.conditions = this.conditions.filter((c) => c !== entry);
          reject(new Error(`only ${this.messages(topic).length} of ${n} messages on ${topic}`));
        }, timeoutMs).unref();
      });
    }
    return this.messages(topic);
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.terminate();
    await this.closed;
  }
}
