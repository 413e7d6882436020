import { RelayError } from '@service-relay/core';

/** realtime's answer, passed on to the host as it is (status and JSON body). */
export interface RealtimeAnswer {
  status: number;
  body: string;
}

export interface RealtimeClientOptions {
  /** REALTIME_URL: realtime's internal HTTP side (any instance; messages fan out through the message bus). */
  baseUrl: string;
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
  constructor(private readonly opts: RealtimeClientOptions) {}

  /** One call publishes to every channel of the request. */
  publish(tenantId: string, body: { channels: string[]; data: unknown; idempotency_key?: string }, requestId: string): Promise<RealtimeAnswer> {
    return this.call('POST', '/internal/server/messages', tenantId, requestId, JSON.stringify(body));
  }

  presence(tenantId: string, channel: string, requestId: string): Promise<RealtimeAnswer> {
    return this.call('GET', `/internal/server/channels/${encodeURIComponent(channel)}/presence`, tenantId, requestId);
  }

  private async call(method: string, path: string, tenantId: string, requestId: string, body?: string): Promise<RealtimeAnswer> {
    try {
      const res = await fetch(`${this.opts.baseUrl}${path}`, {
        method,
        headers: {
          'x-internal-token': this.opts.internalToken,
          'x-relay-tenant-id': tenantId,
          'x-relay-server': '1',
          'x-request-id': requestId,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body }),
        signal: AbortSignal.timeout(this.opts.timeoutMs),
      });
      return { status: res.status, body: await res.text() };
    } catch (err) {
      throw new RelayError('unavailable', 'realtime unavailable', { cause: err });
    }
  }
}
