import { Agent, request } from 'undici';

/** What the host answered: its status and body (bounded). */
export interface CallbackResponse {
  status: number;
  body: string;
}

/** Sends one callback request; rejects on a timeout, a network failure or an answer over the size bound. */
export interface CallbackTransport {
  post(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<CallbackResponse>;
  close(): Promise<void>;
}

/** An answer is a small JSON object; more than this is not read (the request fails). */
export const MAX_CALLBACK_ANSWER_BYTES = 16 * 1024;

/**
 * The HTTP side of callbacks (undici): one keep-alive pool per origin
 * (`connections` sockets at most each, so a slow host cannot take every
 * socket of the process), a hard deadline per request through an
 * AbortSignal covering connect, headers and body, and no redirects (a
 * 3xx is an answer we do not accept).
 */
export function createCallbackTransport(opts: { connectionsPerOrigin: number }): CallbackTransport {
  const agent = new Agent({ connections: opts.connectionsPerOrigin, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000, pipelining: 1 });
  return {
    async post(url, headers, body, timeoutMs) {
      const signal = AbortSignal.timeout(timeoutMs);
      const res = await request(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', 'user-agent': 'service-relay-callbacks' }, body, dispatcher: agent, signal });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > MAX_CALLBACK_ANSWER_BYTES) {
          res.body.destroy();
          throw new Error('callback answer too large');
        }
        chunks.push(chunk);
      }
      return { status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') };
    },
    close: () => agent.close(),
  };
}
