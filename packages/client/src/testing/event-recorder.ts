import type { RelayClient } from '../relay-client.js';
import type { RelayClientEvents } from '../types.js';

type Entry = { [K in keyof RelayClientEvents]: { event: K; payload: RelayClientEvents[K] } }[keyof RelayClientEvents];

/**
 * Records every event of a client and lets a test await the next one that
 * matches (each entry is handed out once), with a bounded wait.
 */
export class EventRecorder {
  readonly entries: Entry[] = [];
  private readonly taken = new Set<number>();
  private waiters: { match: (e: Entry) => boolean; resolve: (e: Entry) => void }[] = [];

  constructor(client: RelayClient) {
    const events: (keyof RelayClientEvents)[] = ['state', 'ready', 'message', 'subscribed', 'gap', 'join', 'leave', 'token_refreshed', 'disconnected', 'error'];
    for (const event of events) {
      client.on(event, (payload) => {
        const entry = { event, payload } as Entry;
        const index = this.entries.push(entry) - 1;
        const w = this.waiters.find((x) => x.match(entry));
        if (w) {
          this.taken.add(index);
          this.waiters = this.waiters.filter((x) => x !== w);
          w.resolve(entry);
        }
      });
    }
  }

  /** Payloads of one event so far. */
  all<K extends keyof RelayClientEvents>(event: K): RelayClientEvents[K][] {
    return this.entries.filter((e) => e.event === event).map((e) => e.payload as RelayClientEvents[K]);
  }

  next<K extends keyof RelayClientEvents>(event: K, pred: (p: RelayClientEvents[K]) => boolean = () => true, timeoutMs = 5000): Promise<RelayClientEvents[K]> {
    const match = (e: Entry) => e.event === event && pred(e.payload as RelayClientEvents[K]);
    const i = this.entries.findIndex((e, idx) => !this.taken.has(idx) && match(e));
    if (i >= 0) {
      this.taken.add(i);
      return Promise.resolve(this.entries[i]!.payload as RelayClientEvents[K]);
    }
    return new Promise((resolve, reject) => {
      const waiter = { match, resolve: (e: Entry) => resolve(e.payload as RelayClientEvents[K]) };
      this.waiters.push(waiter);
      setTimeout(() => {
        if (!this.waiters.includes(waiter)) return;
        this.waiters = this.waiters.filter((x) => x !== waiter);
        const recent = this.entries.slice(-6).map((e) => `${e.event}:${JSON.stringify(e.payload instanceof Error ? { code: (e.payload as { code?: string }).code } : e.payload)}`);
        reject(new Error(`no ${String(event)} event within ${timeoutMs} ms; recent: ${recent.join(' | ')}`));
      }, timeoutMs).unref();
    });
  }

  /** Resolves once `n` messages of a channel have been delivered. */
  async messages(channel: string, n: number, timeoutMs = 10_000): Promise<RelayClientEvents['message'][]> {
    const have = () => this.all('message').filter((m) => m.channel === channel);
    const deadline = Date.now() + timeoutMs;
    while (have().length < n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`only ${have().length} of ${n} messages on ${channel}`);
      await this.next('message', (m) => m.channel === channel, left).catch(() => undefined);
    }
    return have();
  }
}
