import { Agent } from 'node:http';

/**
 * The keep-alive agent for upstream requests (keep-alive roughly doubles
 * throughput). maxSockets stays unbounded: a request waiting for a pooled
 * socket would wait in the gateway, not at the upstream that can answer it.
 *
 * `timeout` matters for correctness: Node's agent only honours an upstream's
 * `Keep-Alive: timeout=N` hint (retiring idle sockets a second early) when it
 * is shorter than an agent timeout that is set. Without one, an idle socket is
 * kept until the upstream closes it, and a request sent on it at that moment
 * fails with ECONNRESET: a spurious 502.
 */
export function createUpstreamAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, timeout: 60_000 });
}
