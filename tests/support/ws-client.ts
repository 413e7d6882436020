import { WebSocket } from 'ws';

export type Frame = Record<string, unknown> & { type: string };

/** A WebSocket client that lets a test await frames and the close, never sleep. */
export class TestSocket {
  readonly frames: Frame[] = [];
  closeCode: number | undefined;
  closeReason: string | undefined;
  private waiters: Array<() => void> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.frames.push(JSON.parse(data.toString()) as Frame);
      this.notify();
    });
    ws.on('close', (code, reason) => {
      this.closeCode = code;
      this.closeReason = reason.toString();
      this.notify();
    });
  }

  /** Opens a connection; resolves after `ready`, rejects with the HTTP status if the upgrade is refused. */
  static open(url: string, token?: string, viaQuery = false): Promise<TestSocket> {
    const target = viaQuery && token ? `${url}?access_token=${encodeURIComponent(token)}` : url;
    const headers = token && !viaQuery ? { authorization: `Bearer ${token}` } : undefined;
    const ws = new WebSocket(target, headers ? { headers } : {});
    const sock = new TestSocket(ws);
    return new Promise((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode, body })));
      });
      ws.once('error', reject);
      sock.next((f) => f.type === 'ready', 10_000).then(() => resolve(sock), reject);
    });
  }

  send(frame: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(frame));
  }

  /** The first frame (seen or future) matching `pred`; it is removed from the queue. */
  next(pred: (f: Frame) => boolean, timeoutMs = 5000): Promise<Frame> {
    return this.until(() => {
      const i = this.frames.findIndex(pred);
      return i >= 0 ? this.frames.splice(i, 1)[0] : undefined;
    }, timeoutMs, 'frame');
  }

  /** Resolves with the close code. */
  closed(timeoutMs = 5000): Promise<number> {
    return this.until(() => this.closeCode, timeoutMs, 'close');
  }

  close(): void {
    this.ws.close();
  }

  private until<T>(probe: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const v = probe();
        if (v !== undefined) {
          clearTimeout(timer);
          this.waiters = this.waiters.filter((w) => w !== check);
          resolve(v);
          return;
        }
        if (this.closeCode !== undefined && what === 'frame') {
          clearTimeout(timer);
          this.waiters = this.waiters.filter((w) => w !== check);
          reject(new Error(`socket closed (${this.closeCode}) while waiting for a frame`));
        }
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== check);
        reject(new Error(`no ${what} within ${timeoutMs} ms; frames: ${JSON.stringify(this.frames)}`));
      }, timeoutMs);
      this.waiters.push(check);
      check();
    });
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }
}
