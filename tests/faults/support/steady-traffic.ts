import { fetchSecret } from '../../support/host';
import type { FaultStack } from './fault-stack';
import { openSocket, restPublish, wsPublish, type Tenant } from './probes';
import type { TestSocket } from '../../support/ws-client';

/** One answer that was not the success a valid request deserves. */
export interface Refusal {
  what: string;
  at: number;
  status: string;
}

/**
 * Valid traffic of an unchanged tenant, steady across a fault: REST
 * (GET /api/v1/me and publishes) through every gateway, a publishing
 * WebSocket on each realtime instance, and host-sync fetches through every
 * gateway. Every answer that is not the success is kept with its time.
 */
export class SteadyTraffic {
  readonly refusals: Refusal[] = [];
  readonly ok = new Map<string, number>();
  private stopped = false;
  private loops: Array<Promise<void>> = [];
  private readonly deadline: number;

  constructor(
    private readonly stack: FaultStack,
    private readonly t: Tenant,
    maxMs: number,
    private readonly pauseMs = 50,
  ) {
    this.deadline = Date.now() + maxMs;
  }

  private get running(): boolean {
    return !this.stopped && Date.now() < this.deadline;
  }

  private record(what: string, good: boolean, status: string): void {
    if (good) this.ok.set(what, (this.ok.get(what) ?? 0) + 1);
    else this.refusals.push({ what, at: Date.now(), status });
  }

  async start(): Promise<void> {
    const token = await this.t.token();
    this.stack.gatewayUrls.forEach((url, i) => {
      this.loops.push(this.loop(async (n) => {
        if (n % 2 === 0) {
          const res = await fetch(`${url}/api/v1/me`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(5000) }).catch(() => undefined);
          await res?.arrayBuffer();
          this.record(`gateway${i + 1} me`, res?.status === 200, String(res?.status ?? 'no answer'));
        } else {
          const r = await restPublish({ ...this.stack, gatewayUrl: url } as FaultStack, token, 'steady', { n });
          this.record(`gateway${i + 1} publish`, r.status === 201, String(r.status || 'no answer'));
        }
      }));
      this.loops.push(this.loop(async () => {
        const res = await fetchVia(url, this.t).catch(() => undefined);
        this.record(`gateway${i + 1} host-sync fetch`, res === 200, String(res ?? 'no answer'));
      }));
    });
    const sockets: TestSocket[] = await Promise.all(this.stack.realtimeWs.map((u) => openSocket(u, token)));
    sockets.forEach((s, i) => {
      this.loops.push(this.loop(async (n) => {
        if (s.closeCode !== undefined) {
          this.record(`realtime${i + 1} ws`, false, `closed ${s.closeCode}`);
          throw new Error('closed');
        }
        const r = await wsPublish(s, this.t.topic('steady'), { n }, 5000);
        this.record(`realtime${i + 1} ws publish`, r.id !== undefined, r.code ?? 'ok');
      }));
    });
  }

  private async loop(step: (n: number) => Promise<void>): Promise<void> {
    for (let n = 0; n < 100_000 && this.running; n++) {
      try {
        await step(n);
      } catch {
        return;
      }
      await new Promise((r) => setTimeout(r, this.pauseMs));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  summary(): string {
    const ok = [...this.ok].map(([k, n]) => `${k} ${n}`).join(', ');
    const bad = new Map<string, number>();
    for (const r of this.refusals) bad.set(`${r.what} ${r.status}`, (bad.get(`${r.what} ${r.status}`) ?? 0) + 1);
    return `served: ${ok}; refused: ${bad.size === 0 ? 'none' : [...bad].map(([k, n]) => `${k}×${n}`).join(', ')}`;
  }
}

async function fetchVia(gatewayUrl: string, t: Tenant): Promise<number> {
  const res = await fetchSecret(gatewayUrl, t.id, t.clientId, t.clientSecret);
  await res.arrayBuffer();
  return res.status;
}
