import { RelayError } from '@service-relay/core';
import { INTERNAL_TOKEN_HEADER } from '@service-relay/edge';

const PASSED_HEADERS = ['retry-after', 'x-relay-limit'];

/** realtime's answer, passed on to the host as it is (status and JSON body). */
export interface RealtimeAnswer {
  status: number;
  /** Retry-After and X-Relay-Limit when realtime sent them. */
  headers?: Record<string, string>;
  body: string;
}

/** realtime's GET /internal/live (services/realtime/src/http/live-api.ts). */
export interface RealtimeLive {
  instance_id: string;
  feed_current: boolean;
  connections: number;
  channels_open: number;
  tenants: Array<{ tenant_id: string; connections: number }>;
  channels: Array<{ tenant_id: string; channel: string; subscribers: number; presence: number | null }>;
}

/** One REALTIME_URL entry's snapshot, or why there is none. */
export type InstanceLive = { address: string; snapshot: RealtimeLive } | { address: string; error: string };

export interface RealtimeClientOptions {
  /** REALTIME_URL: realtime instances' internal HTTP side (any one will do: messages fan out through the message bus). */
  baseUrls: readonly string[];
  internalToken: string;
  /** An answer not received within this is `unavailable`. */
  timeoutMs: number;
}

/**
 * The registry's calls to realtime's internal server API (#13): publish as
 * the server and list presence. Each proves itself with INTERNAL_TOKEN and
 * carries the tenant and the server marker (`x-relay-server`) that the
 * gateway strips from every client request.
 */
export class RealtimeClient {
  private next = 0;

  constructor(private readonly opts: RealtimeClientOptions) {
    if (opts.baseUrls.length === 0) throw new Error('RealtimeClient: at least one base URL');
  }

  /** One call publishes to every channel of the request. */
  publish(tenantId: string, body: { channels: string[]; data: unknown; idempotency_key?: string }, requestId: string): Promise<RealtimeAnswer> {
    return this.call('POST', '/internal/server/messages', tenantId, requestId, JSON.stringify(body));
  }

  presence(tenantId: string, channel: string, requestId: string): Promise<RealtimeAnswer> {
    return this.call('GET', `/internal/server/channels/${encodeURIComponent(channel)}/presence`, tenantId, requestId);
  }

  /**
   * Every instance's live snapshot (GET /internal/live, the console's Live
   * page), each in its own entry: one that does not answer in time says so
   * and the others are still shown.
   */
  live(): Promise<InstanceLive[]> {
    return Promise.all(
      this.opts.baseUrls.map(async (address): Promise<InstanceLive> => {
        try {
          const res = await fetch(`${address}/internal/live`, { headers: { [INTERNAL_TOKEN_HEADER]: this.opts.internalToken }, signal: AbortSignal.timeout(this.opts.timeoutMs) });
          if (res.status !== 200) return { address, error: `answered ${res.status}` };
          return { address, snapshot: (await res.json()) as RealtimeLive };
        } catch (err) {
          return { address, error: (err as Error).name === 'TimeoutError' ? 'no answer in time' : 'unreachable' };
        }
      }),
    );
  }

  /**
   * Instances are taken in turn; one that refuses the connection (the request
   * never reached it, so nothing was published) is skipped for the next. Any
   * other failure is the answer: a publish that timed out may have been
   * stored, and only the host's idempotency key makes a retry safe.
   */
  private async call(method: string, path: string, tenantId: string, requestId: string, body?: string): Promise<RealtimeAnswer> {
    const urls = this.opts.baseUrls;
    const start = this.next;
    this.next = (this.next + 1) % urls.length;
    for (let i = 0; ; i++) {
      try {
        return await this.once(urls[(start + i) % urls.length]!, method, path, tenantId, requestId, body);
      } catch (err) {
        const refused = (err as { cause?: { cause?: { code?: unknown } } }).cause?.cause?.code === 'ECONNREFUSED';
        if (!refused || i + 1 >= urls.length) throw err;
      }
    }
  }

  private async once(baseUrl: string, method: string, path: string, tenantId: string, requestId: string, body?: string): Promise<RealtimeAnswer> {
    try {
      const res = await fetch(`${baseUrl}${path}`, {
        method,
        headers: {
          [INTERNAL_TOKEN_HEADER]: this.opts.internalToken,
          'x-relay-tenant-id': tenantId,
          'x-relay-server': '1',
          'x-request-id': requestId,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body }),
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      // A refusal by a limit (#30) keeps its Retry-After and X-Relay-Limit on the way to the host.
      const headers: Record<string, string> = {};
      for (const h of PASSED_HEADERS) {
        const v = res.headers.get(h);
        if (v !== null) headers[h] = v;
      }
      return { status: res.status, body: await res.text(), headers };
    } catch (err) {
      throw new RelayError('unavailable', 'realtime unavailable', { cause: err });
    }
  }
}
