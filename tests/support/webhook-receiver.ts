import { createServer, type Server } from 'node:http';
import { freePort } from './processes';

export interface ReceivedWebhook {
  body: string;
  headers: Record<string, string | string[] | undefined>;
  status: number;
  /** When it arrived (ms since the epoch). */
  at: number;
}

/**
 * A real HTTP endpoint for webhook tests: records every request, answers
 * 200, 500, or never (`hang`), as the test sets `mode`.
 */
export class WebhookReceiver {
  mode: 'ok' | 'fail' | 'hang' = 'ok';
  readonly requests: ReceivedWebhook[] = [];
  private waiters: Array<() => void> = [];
  private readonly hanging = new Set<import('node:http').ServerResponse>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<WebhookReceiver> {
    const port = await freePort();
    const server = createServer();
    const self = new WebhookReceiver(server, `http://127.0.0.1:${port}/hooks`);
    server.on('request', (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => self.onRequest(Buffer.concat(chunks).toString('utf8'), req.headers, res));
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    return self;
  }

  /** Every accepted (2xx) request's events, in arrival order. */
  delivered<T = Record<string, unknown>>(): T[] {
    return this.requests.filter((r) => r.status === 200).flatMap((r) => (JSON.parse(r.body) as { events: T[] }).events);
  }

  /** Resolves once `done()` holds (checked at each request), or rejects after `timeoutMs`. */
  async until(done: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('webhook receiver: condition not met in time');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private onRequest(body: string, headers: ReceivedWebhook['headers'], res: import('node:http').ServerResponse): void {
    if (this.mode === 'hang') {
      this.hanging.add(res);
      this.requests.push({ body, headers, status: 0, at: Date.now() });
      return;
    }
    const status = this.mode === 'ok' ? 200 : 500;
    this.requests.push({ body, headers, status, at: Date.now() });
    res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'ok' : 'failing on purpose');
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}
