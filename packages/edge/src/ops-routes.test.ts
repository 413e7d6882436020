import { createServer } from 'node:http';
import { closeServer, createMetricsRegistry, listen } from '@service-relay/core';
import { afterAll, describe, expect, it } from 'vitest';
import { createOpsServer, handleHealth, handleOps, runReadiness } from './ops-routes';

describe('readiness', () => {
  it('turns exactly the hanging check false within its own timeout, and still reports the others', async () => {
    const t0 = Date.now();
    const checks = await runReadiness(
      {
        redis: () => new Promise<boolean>(() => {}),
        database: async () => true,
        bus: () => false,
        broken: () => {
          throw new Error('boom');
        },
      },
      200,
    );
    expect(checks).toEqual({ redis: false, database: true, bus: false, broken: false });
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  describe('/readyz', () => {
    const server = createServer((req, res) => {
      handleOps(req, res, { metrics: createMetricsRegistry('test'), readiness: { database: async () => true, redis: () => new Promise<boolean>(() => {}) } });
    });
    afterAll(() => closeServer(server, 100));

    it('names every check within about a second while one hangs', async () => {
      const port = await listen(server, 0);
      const t0 = Date.now();
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ status: 'not_ready', checks: { database: true, redis: false } });
      expect(Date.now() - t0).toBeLessThan(1800);
    });
  });
});

describe('createOpsServer', () => {
  const metrics = createMetricsRegistry('ops_test');
  const server = createOpsServer({ metrics, readiness: { database: async () => true } });
  let base = '';
  afterAll(() => closeServer(server, 100));

  it('serves /healthz, /readyz and /metrics, and 404 not_found for anything else', async () => {
    base = `http://127.0.0.1:${await listen(server, 0)}`;
    expect(await (await fetch(`${base}/healthz`)).json()).toEqual({ status: 'ok' });
    expect(await (await fetch(`${base}/readyz`)).json()).toEqual({ status: 'ready', checks: { database: true } });
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(text).toContain('process_cpu_user_seconds_total');
    for (const [method, path] of [['GET', '/'], ['GET', '/api/v1/me'], ['POST', '/metrics'], ['DELETE', '/readyz']]) {
      const res = await fetch(`${base}${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await res.json()).toEqual({ errors: ['not_found'] });
    }
  });
});

describe('handleHealth (what a public port keeps)', () => {
  const server = createServer((req, res) => {
    if (!handleHealth(req, res)) res.writeHead(418).end();
  });
  afterAll(() => closeServer(server, 100));

  it('answers GET and HEAD /healthz only, and leaves /readyz and /metrics to the public routes', async () => {
    const base = `http://127.0.0.1:${await listen(server, 0)}`;
    expect(await (await fetch(`${base}/healthz?probe=1`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${base}/healthz`, { method: 'HEAD' })).status).toBe(200);
    for (const path of ['/readyz', '/metrics']) expect((await fetch(`${base}${path}`)).status, path).toBe(418);
    expect((await fetch(`${base}/healthz`, { method: 'POST' })).status).toBe(418);
  });
});
