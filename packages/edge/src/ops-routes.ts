import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Registry } from 'prom-client';
import { errorBody, httpStatusFor, withTimeout } from '@service-relay/core';
import { sendError } from './error-response';
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
 * Serves GET /healthz: the process is up. Returns true when it answered. The
 * one ops endpoint a public port keeps: a load balancer checks the port it
 * sends traffic to, and peers (the gateway's readiness) check the port they
 * call; it reveals nothing and costs nothing. /readyz (which names every
 * dependency and calls each) and /metrics are on the ops port only.
 */
export function handleHealth(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  if ((req.url ?? '').split('?', 1)[0] !== '/healthz') return false;
  sendJson(res, 200, { status: 'ok' });
  return true;
}

/**
 * Serves GET /healthz, /readyz and /metrics. Returns true when it answered,
 * so any HTTP stack (node:http or express) can put it in front of its routes.
 */
export function handleOps(req: IncomingMessage, res: ServerResponse, opts: OpsOptions): boolean {
  if (handleHealth(req, res)) return true;
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const path = (req.url ?? '').split('?', 1)[0];
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

/** How long the ops listener waits for a request head; kubelet and Prometheus send theirs at once. */
const OPS_HEADERS_TIMEOUT_MS = 10_000;

/**
 * The ops listener (docs/OPERATIONS.md "Health, readiness, metrics"): GET
 * /healthz, /readyz and /metrics, and `404 not_found` for anything else, on a
 * port of its own that only the orchestrator and Prometheus reach. The public
 * listeners serve /healthz only. Not under the public connection guard: a
 * gateway at its connection cap must still answer its probes.
 */
export function createOpsServer(opts: OpsOptions): Server {
  const server = createServer((req, res) => {
    if (!handleOps(req, res, opts)) sendError(res, 'not_found');
  });
  server.headersTimeout = OPS_HEADERS_TIMEOUT_MS;
  server.requestTimeout = OPS_HEADERS_TIMEOUT_MS;
  return server;
}
