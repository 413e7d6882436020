import autocannon from 'autocannon';
import { serveWorker } from '../lib/worker-runtime';

/** The HTTP load generator: autocannon in its own process, one thread. */

interface RunArgs {
  url: string;
  connections: number;
  seconds: number;
  /** Bearer tokens (distinct users', signed by the caller), rotated per request. */
  tokens?: string[];
}

export interface HttpLoadResult {
  rps: number;
  ok: number;
  non2xx: number;
  errors: number;
  p99Ms: number;
  /** Answers by status code other than 2xx, e.g. { "503": 2 }. */
  otherStatuses: Record<string, number>;
}

async function run(args: RunArgs): Promise<HttpLoadResult> {
  let requests: autocannon.Request[] | undefined;
  if (args.tokens && args.tokens.length > 0) {
    const pool = args.tokens;
    let i = 0;
    requests = [{ setupRequest: (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer ${pool[i++ % pool.length]}` } }) }];
  }
  const result = await autocannon({ url: args.url, connections: args.connections, duration: args.seconds, ...(requests ? { requests } : {}) });
  return {
    rps: result['2xx'] / result.duration,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    p99Ms: result.latency.p99,
    otherStatuses: Object.fromEntries(
      Object.entries(result.statusCodeStats ?? {})
        .filter(([code]) => !code.startsWith('2'))
        .map(([code, s]) => [code, s.count ?? 0]),
    ),
  };
}

serveWorker({ run });
