import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import express from 'express';
import { createLogger, listen, ManualClock, MemoryRateLimiter } from '@service-relay/core';
import { internalCaller } from '@service-relay/edge';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createRegistryMetrics } from '../metrics';
import type { HostSyncCheck } from '../tenants/host-sync-check';
import { AddressFailureLimit } from './address-failure-limit';
import { FAILURE_FLOOR_MS, hostSyncFetch } from './host-sync-fetch';

const KNOWN = '0b7c3d1e-2f4a-4b5c-9d6e-7f8091a2b3c4';
const GOOD = `Basic ${Buffer.from('hs_client:right').toString('base64')}`;
const WRONG = `Basic ${Buffer.from('hs_client:wrong').toString('base64')}`;

describe('the host-sync credential gate', () => {
  const clock = new ManualClock(1_000_000);
  const fetchPrimaryKey = vi.fn(async (id: string, creds: { secret: string } | undefined) => (id === KNOWN && creds?.secret === 'right' ? { secret: 'the-primary', keyVersion: 1 } : undefined));
  const check = { fetchPrimaryKey } as unknown as HostSyncCheck;
  let server: Server;
  let base = '';
  beforeAll(async () => {
    const app = express();
    app.use(
      hostSyncFetch(check, createRegistryMetrics(), createLogger({ service: 't', level: 'silent' }), {
        limiter: new MemoryRateLimiter({ limit: 100, windowMs: 60_000, clock }),
        fromGateway: internalCaller('internal'),
        addresses: new AddressFailureLimit(new MemoryRateLimiter({ limit: 3, windowMs: 60_000, clock }), clock),
      }),
    );
    server = (await import('node:http')).createServer(app);
    base = `http://127.0.0.1:${await listen(server, 0)}`;
  });
  afterAll(() => new Promise((r) => server.close(r)));

  const fetchSecret = async (tenantId: string, authorization: string) => {
    const started = performance.now();
    const res = await fetch(`${base}/api/host/tenants/${tenantId}/jwt_secret/fetch`, { method: 'POST', headers: { authorization } });
    return { status: res.status, body: await res.text(), retryAfter: res.headers.get('retry-after'), ms: performance.now() - started };
  };

  it('answers every failure no sooner than the floor, whether the check was instant or not', async () => {
    clock.advance(60_000);
    const unknown = await fetchSecret(randomUUID(), WRONG);
    expect(unknown.status).toBe(401);
    expect(unknown.ms).toBeGreaterThanOrEqual(FAILURE_FLOOR_MS - 1);
    expect((await fetchSecret(KNOWN, GOOD)).status).toBe(200);
  });

  it('refuses an address over its failure limit with 429 before any check (made-up tenant ids cost no reads), until its window ends', async () => {
    clock.advance(60_000);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await fetchSecret(randomUUID(), WRONG)).status);
    expect(statuses).toEqual([401, 401, 401, 429]);
    fetchPrimaryKey.mockClear();
    const blocked = [await fetchSecret(randomUUID(), WRONG), await fetchSecret(KNOWN, WRONG), await fetchSecret(KNOWN, GOOD)];
    expect(blocked.map((b) => [b.status, b.body])).toEqual(Array.from({ length: 3 }, () => [429, '{"errors":["rate_limited"]}']));
    expect(Number(blocked[0]!.retryAfter)).toBeGreaterThan(0);
    expect(fetchPrimaryKey, 'nothing was checked (nor read) for a blocked address').not.toHaveBeenCalled();
    clock.advance(60_000);
    expect((await fetchSecret(KNOWN, GOOD)).status).toBe(200);
    expect(fetchPrimaryKey).toHaveBeenCalledTimes(1);
  });
});
