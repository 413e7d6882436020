import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { TestSocket } from '../../support/ws-client';
import type { FaultStack } from './fault-stack';
import { eventually, isIncreasing, openSocket, restPublish, subscribe, wsPublish, type Tenant } from './probes';

/**
 * Background traffic of a bystander tenant across a fault: a subscriber on
 * each realtime instance, and a publisher alternating REST (gateway →
 * realtime1) and WebSocket (on realtime2), recording every acknowledged id.
 * Afterwards a client reconnecting with `after` must get every acknowledged
 * message, or be told `recovered: false`.
 */
const runningTraffic = new Set<Traffic>();

/** Stops every background publisher still running (after a failed test). */
export async function stopTraffic(): Promise<void> {
  await Promise.all([...runningTraffic].map((t) => t.stop()));
}

export class Traffic {
  readonly acked: string[] = [];
  readonly failures = new Map<string, number>();
  anchor = '';
  epoch: unknown;
  private subs: TestSocket[] = [];
  private publisher: TestSocket | undefined;
  private stopped = false;
  private loop: Promise<void> = Promise.resolve();
  private token = '';

  constructor(
    private readonly stack: FaultStack,
    readonly t: Tenant,
    private readonly channel = `traffic-${randomUUID().slice(0, 8)}`,
  ) {}

  get topic(): string {
    return this.t.topic(this.channel);
  }

  async start(): Promise<void> {
    this.token = await this.t.token();
    const first = await restPublish(this.stack, this.token, this.channel, { n: -1 });
    expect(first.status).toBe(201);
    this.anchor = first.id!;
    for (const url of this.stack.realtimeWs) {
      const s = await openSocket(url, this.token);
      const f = await subscribe(s, this.topic, this.anchor);
      expect(f.type).toBe('subscribed');
      this.epoch ??= f.epoch;
      this.subs.push(s);
    }
    this.publisher = await openSocket(this.stack.realtimeWs[1], this.token);
    runningTraffic.add(this);
    this.loop = this.run();
  }

  /** Resolves once `n` publishes were acknowledged (so the fault hits a stream with history). */
  async warmUp(n = 4): Promise<void> {
    await eventually(`${n} publishes acknowledged before the fault`, async () => this.acked.length >= n, 10_000, 20);
  }

  private fail(what: string): void {
    this.failures.set(what, (this.failures.get(what) ?? 0) + 1);
  }

  /**
   * Publishes n = 0, 1, 2… (even: REST through the gateway, odd: WebSocket on
   * realtime2), each with an idempotency key. A publish whose outcome is not
   * an acknowledgement is sent again with the same key (at most 3 attempts),
   * so a write that did land before its answer was lost must not show twice.
   */
  private async run(): Promise<void> {
    const until = Date.now() + 120_000;
    let n = 0;
    let attempt = 0;
    let key = randomUUID();
    for (let round = 0; round < 3000 && !this.stopped && Date.now() < until; round++) {
      let id: string | undefined;
      if (n % 2 === 0) {
        const r = await restPublish(this.stack, this.token, this.channel, { n }, 5000, key);
        id = r.id;
        if (!id) this.fail(`rest_${r.status}`);
      } else {
        if (!this.publisher || this.publisher.closeCode !== undefined) {
          this.publisher = await openSocket(this.stack.realtimeWs[1], this.token).catch(() => undefined);
        }
        if (this.publisher) {
          const r = await wsPublish(this.publisher, this.topic, { n }, 5000, key);
          id = r.id;
          if (!id) this.fail(`ws_${r.code}`);
        } else this.fail('ws_connect');
      }
      if (id) this.acked.push(id);
      if (id || ++attempt >= 3) {
        n++;
        attempt = 0;
        key = randomUUID();
      }
      await new Promise((r) => setTimeout(r, 40));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    runningTraffic.delete(this);
    await this.loop;
  }

  /** Acknowledged publishes in this run (stop() first). */
  summary(): string {
    const f = [...this.failures].map(([k, v]) => `${k}×${v}`).join(' ');
    return `${this.acked.length} acked${f ? `, refused/failed: ${f}` : ''}`;
  }

  /**
   * The same question over REST (gateway → realtime1): history with `after` =
   * the anchor (and the epoch), paged, must hold every acknowledged message
   * unless the first page says `recovered: false`.
   */
  async restReplay(): Promise<RestReplay> {
    const token = await this.t.token();
    const epoch = typeof this.epoch === 'string' && this.epoch !== '' ? `&epoch=${encodeURIComponent(this.epoch)}` : '';
    const ids: string[] = [];
    const ns: number[] = [];
    let after = this.anchor;
    let first: { recovered?: boolean; reason?: unknown } | undefined;
    const want = new Set(this.acked);
    for (let page = 0; page < 100 && want.size > 0; page++) {
      const res = await fetch(`${this.stack.gatewayUrl}/api/v1/channels/${this.channel}/messages?after=${after}&limit=100${epoch}`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5000) });
      expect(res.status, 'REST history answers').toBe(200);
      const body = (await res.json()) as { messages: Array<{ id: string; data: { n: number } }>; recovered?: boolean; reason?: unknown };
      first ??= body;
      if (body.recovered === false || body.messages.length === 0) break;
      for (const m of body.messages) {
        ids.push(m.id);
        ns.push(m.data.n);
        want.delete(m.id);
      }
      after = body.messages[body.messages.length - 1]!.id;
    }
    if (first?.recovered === false) return { recovered: false, reason: first.reason, ids };
    expect([...want], `acknowledged messages missing from REST history (recovered: ${String(first?.recovered)})`).toEqual([]);
    expect(isIncreasing(ids), 'REST history ids increase').toBe(true);
    expect(ns.filter((n, i) => ns.indexOf(n) !== i), 'no publish stored twice in REST history').toEqual([]);
    return { recovered: first?.recovered, reason: first?.reason, ids };
  }

  /** Ids each surviving subscriber received were strictly increasing (no duplicate, no step back). */
  subscribersInOrder(): boolean {
    return this.subs.every((s) => isIncreasing(s.frames.filter((f) => f.type === 'message').map((f) => f.id as string)));
  }

  /**
   * A new client on `instance` subscribes with `after` = the anchor: either
   * `recovered: false`, or every acknowledged message, in increasing order.
   */
  async reconnect(instance: 0 | 1): Promise<{ recovered: boolean; reason?: unknown; replayed: number }> {
    const s = await openSocket(this.stack.realtimeWs[instance], await this.t.token());
    const f = await subscribe(s, this.topic, this.anchor, this.epoch);
    expect(f.type, JSON.stringify(f)).toBe('subscribed');
    if (f.recovered === false) {
      s.close();
      return { recovered: false, reason: f.reason, replayed: 0 };
    }
    const want = new Set(this.acked);
    const seen: string[] = [];
    const ns: number[] = [];
    const deadline = Date.now() + 10_000;
    for (let i = 0; i < 20_000 && want.size > 0 && Date.now() < deadline; i++) {
      const m = await s.next((x) => x.type === 'message', Math.max(1, deadline - Date.now())).catch(() => undefined);
      if (!m) break;
      seen.push(m.id as string);
      ns.push((m.data as { n: number }).n);
      want.delete(m.id as string);
    }
    s.close();
    expect([...want], `acknowledged messages missing from the replay on realtime${instance + 1} (recovered: ${String(f.recovered)})`).toEqual([]);
    expect(isIncreasing(seen), 'replayed ids increase').toBe(true);
    expect(ns.filter((n, i) => ns.indexOf(n) !== i), 'no publish stored twice (retries carry the same idempotency key)').toEqual([]);
    return { recovered: true, reason: f.reason, replayed: seen.length };
  }
}

/** What the REST history answers to `after`: the first page's recovery flags and every id read. */
export interface RestReplay {
  recovered: boolean | undefined;
  reason?: unknown;
  ids: string[];
}
