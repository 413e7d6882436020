import type { IncomingMessage, ServerResponse } from 'node:http';
import { collectDefaultMetrics, Registry } from 'prom-client';

export type ReadinessCheck = () => Promise<Record<string, boolean>>;

/** One prom-client registry per service, so services in one process do not collide. */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

export interface OpsOptions {
  metrics: Registry;
  readiness: ReadinessCheck;
}

/**
 * Serves GET /healthz, /readyz and /metrics. Returns true when it answered,
 * so any HTTP stack (node:http or express) can put it in front of its routes.
 */
export function handleOps(req: IncomingMessage, res: ServerResponse, opts: OpsOptions): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const path = (req.url ?? '').split('?', 1)[0];
  if (path === '/healthz') {
    sendJson(res, 200, { status: 'ok' });
    return true;
  }
  if (path === '/readyz') {
    withTimeout(opts.readiness(), 2000).then(
      (checks) => {
        const ok = Object.values(checks).every(Boolean);
        sendJson(res, ok ? 200 : 503, { status: ok ? 'ready' : 'not_ready', checks });
      },
      () => sendJson(res, 503, { status: 'not_ready', checks: {} }),
    );
    return true;
  }
  if (path === '/metrics') {
    opts.metrics.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': opts.metrics.contentType });
        res.end(text);
      },
      () => sendJson(res, 500, { errors: ['internal'] }),
    );
    return true;
  }
  return false;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
