import { randomUUID } from 'node:crypto';
import { TestSocket, type Frame } from '../../support/ws-client';
import { compareIds } from './probes';

/**
 * Steady client traffic for the rolling-upgrade test, as real clients behave:
 * REST publishes that are sent again with the same Idempotency-Key when no
 * answer came or a 503 asked to retry (after its Retry-After), and
 * WebSocket subscribers that reconnect after every close and resume with
 * `after` = the last id they received. Everything is counted; nothing is
 * asserted here.
 */

export interface Answer {
  at: number;
  what: string;
  status: number;
  body: string;
  retryAfter: string | null;
}

export class RestTraffic {
  sent = 0;
  answered = 0;
  noAnswer = 0;
  /** 503 answers with a Retry-After (documented as retryable). */
  retryable503: Answer[] = [];
  /** Any other 5xx, or an answer no client of a healthy service should get. */
  bad: Answer[] = [];
  readonly acked: Array<{ id: string; n: number }> = [];
  private stopped = false;
  private loops: Promise<void>[] = [];

  constructor(
    private readonly gatewayUrl: string,
    private readonly token: () => Promise<string>,
    private readonly channel: string,
  ) {}

  start(publishers: number, readers: number): void {
    let n = 0;
    for (let i = 0; i < publishers; i++) this.loops.push(this.publisher(() => n++));
    for (let i = 0; i < readers; i++) this.loops.push(this.reader());
  }

  private async send(what: string, url: string, init: RequestInit): Promise<{ status: number; body: string } | undefined> {
    this.sent++;
    try {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
      const body = await res.text();
      this.answered++;
      if (res.status >= 500 || res.status === 429) {
        const a = { at: Date.now(), what, status: res.status, body: body.slice(0, 300), retryAfter: res.headers.get('retry-after') };
        if (res.status === 503 && a.retryAfter !== null) {
          this.retryable503.push(a);
          await new Promise((r) => setTimeout(r, Math.min(2000, Number(a.retryAfter) * 1000 || 1000)));
        } else {
          this.bad.push(a);
        }
      }
      return { status: res.status, body };
    } catch {
      this.noAnswer++;
      return undefined;
    }
  }

  private async publisher(nextN: () => number): Promise<void> {
    const until = Date.now() + 240_000;
    for (let round = 0; round < 20_000 && !this.stopped && Date.now() < until; round++) {
      const n = nextN();
      const key = randomUUID();
      const token = await this.token();
      for (let attempt = 0; attempt < 50 && Date.now() < until; attempt++) {
        const r = await this.send('publish', `${this.gatewayUrl}/api/v1/channels/${this.channel}/messages`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': key },
          body: JSON.stringify({ data: { n } }),
        });
        if (r?.status === 201) {
          this.acked.push({ id: (JSON.parse(r.body) as { id: string }).id, n });
          break;
        }
        if (r && r.status < 500) {
          this.bad.push({ at: Date.now(), what: 'publish', status: r.status, body: r.body.slice(0, 300), retryAfter: null });
          break;
        }
        if (!r) await new Promise((res) => setTimeout(res, 20));
      }
      await new Promise((res) => setTimeout(res, 15));
    }
  }

  private async reader(): Promise<void> {
    const until = Date.now() + 240_000;
    for (let round = 0; round < 20_000 && !this.stopped && Date.now() < until; round++) {
      const r = await this.send('me', `${this.gatewayUrl}/api/v1/me`, { headers: { authorization: `Bearer ${await this.token()}` } });
      if (r && r.status !== 200 && r.status < 500) this.bad.push({ at: Date.now(), what: 'me', status: r.status, body: r.body.slice(0, 300), retryAfter: null });
      await new Promise((res) => setTimeout(res, 15));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }
}

/** One WebSocket client that stays subscribed to `topic` across every close. */
export class ResumingSubscriber {
  readonly ids: string[] = [];
  readonly closes: number[] = [];
  /** Upgrades refused while reconnecting: HTTP status (0: no answer). */
  readonly refused: number[] = [];
  /** `subscribed` frames on a resume that did not say recovered: true. */
  readonly notRecovered: Frame[] = [];
  reconnects = 0;
  private sock: TestSocket | undefined;
  private stopped = false;
  private loop: Promise<void> = Promise.resolve();
  private epoch: unknown;

  constructor(
    readonly name: string,
    private readonly url: string,
    private readonly token: () => Promise<string>,
    private readonly topic: string,
    private after: string,
  ) {}

  /** Resolves once the first subscription is in place. */
  async start(): Promise<void> {
    await this.connect(true);
    this.loop = this.run();
  }

  private async connect(first: boolean): Promise<void> {
    const s = await TestSocket.open(this.url, await this.token());
    s.ws.on('message', (data: Buffer) => {
      const f = JSON.parse(data.toString()) as Frame;
      if (f.type === 'message' && f.topic === this.topic) {
        this.ids.push(f.id as string);
        if (compareIds(f.id as string, this.after) > 0) this.after = f.id as string;
      }
    });
    const ref = `r${Math.random()}`;
    s.send({ type: 'subscribe', topic: this.topic, ref, after: this.after, ...(typeof this.epoch === 'string' && this.epoch !== '' ? { epoch: this.epoch } : {}) });
    const f = await s.next((x) => x.ref === ref && (x.type === 'subscribed' || x.type === 'error'), 10_000);
    if (f.type !== 'subscribed') {
      s.ws.terminate();
      throw new Error(`${this.name}: subscribe answered ${JSON.stringify(f)}`);
    }
    if (!first && f.recovered !== true) this.notRecovered.push(f);
    this.epoch ??= f.epoch;
    this.sock = s;
  }

  private async run(): Promise<void> {
    const until = Date.now() + 240_000;
    for (let round = 0; round < 1000 && !this.stopped && Date.now() < until; round++) {
      const code = await this.sock!.closed(Math.max(1, until - Date.now())).catch(() => undefined);
      if (this.stopped || code === undefined) return;
      this.closes.push(code);
      for (let attempt = 0; attempt < 200 && !this.stopped && Date.now() < until; attempt++) {
        try {
          await this.connect(false);
          this.reconnects++;
          break;
        } catch (err) {
          this.refused.push((err as { status?: number }).status ?? 0);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    }
  }

  /** Duplicated ids (a message delivered twice). */
  doubles(): string[] {
    return this.ids.filter((id, i) => this.ids.indexOf(id) !== i);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.sock?.ws.terminate();
    await this.loop;
  }
}
