import { createServer } from 'node:http';
import { closeServer, createMetricsRegistry, listen } from '@service-relay/core';
import { afterAll, describe, expect, it } from 'vitest';
import { handleOps, runReadiness } from './ops-routes';

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
