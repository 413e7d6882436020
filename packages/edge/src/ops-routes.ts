import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { errorBody, httpStatusFor, withTimeout } from '@service-relay/core';
import { sendJson } from './json-response';

/** One dependency's check: true when reachable. */
export type ReadinessProbe = () => Promise<boolean> | boolean;
/** Named checks; /readyz reports each by name. */
export type ReadinessCheck = Readonly<Record<string, ReadinessProbe>>;

/** Each check gets this long on its own; a hanging dependency turns only its own check false. */
export const READINESS_CHECK_TIMEOUT_MS = 1000;

/**
 * Runs every check concurrently, each under its own deadline, so one hanging
 * dependency (a Redis that accepts and never answers) cannot blank the report
 * of the others. A check that throws or misses its deadline is false.
 */
export async function runReadiness(checks: ReadinessCheck, timeoutMs = READINESS_CHECK_TIMEOUT_MS): Promise<Record<string, boolean>> {
  const names = Object.keys(checks);
  const results = await Promise.all(
    names.map((name) =>
      withTimeout(Promise.resolve().then(() => checks[name]!()), timeoutMs).then(
        (ok) => ok === true,
        () => false,
      ),
    ),
  );
  const out: Record<string, boolean> = {};
  names.forEach((name, i) => (out[name] = results[i]!));
  return out;
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
    void runReadiness(opts.readiness).then((checks) => {
      const ok = Object.values(checks).every(Boolean);
      sendJson(res, ok ? 200 : 503, { status: ok ? 'ready' : 'not_ready', checks });
    });
    return true;
  }
  if (path === '/metrics') {
    opts.metrics.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': opts.metrics.contentType });
        res.end(text);
      },
      () => sendJson(res, httpStatusFor('internal'), errorBody('internal')),
    );
    return true;
  }
  return false;
}
