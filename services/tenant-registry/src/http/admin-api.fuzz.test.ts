import fc from 'fast-check';
import { contractViolation, sendHttp, type AllowedErrors, type HttpAnswer } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestRegistry, type TestRegistry } from '../testing/test-registry';

// Arbitrary bodies, paths and queries to the admin API (with the right admin
// token): contract 4xx codes or a success, never a 500. Seeded; fast-check
// prints the seed and the shrunk request on failure.
const config = { seed: 0x6a7e_0007, numRuns: 200 };
const UNKNOWN_ID = '6f1d2a7e-3c1b-4e55-8a2f-0b9c8d7e6f50';
const ALLOWED: AllowedErrors = {
  400: ['invalid_body', 'invalid_tenant_id', 'invalid_query'],
  404: ['not_found', 'tenant_not_found'],
  405: ['method_not_allowed'],
  413: ['payload_too_large'],
};



function expectContract(a: HttpAnswer, ok: number[]): void {
  expect(contractViolation(a, ALLOWED, ok)).toBeUndefined();
}

describe('admin API under arbitrary requests', () => {
  let reg: TestRegistry;
  let auth: Record<string, string>;

  beforeAll(async () => {
    reg = await startTestRegistry({ logLevel: 'info' });
    auth = { authorization: `Bearer ${reg.adminToken}` };
  });
  afterAll(async () => {
    await reg?.stop();
  });

  it('POST bodies of any bytes and type: 400 invalid_body, 413, or (empty / {}) the action itself, never 500', async () => {
    const body = fc.oneof(
      fc.uint8Array({ maxLength: 1500 }).map((b) => Buffer.from(b)),
      fc.string({ unit: 'binary', maxLength: 200 }).map((s) => Buffer.from(s)),
      fc.json({ maxDepth: 3 }).map((s) => Buffer.from(s)),
      fc.integer({ min: 100, max: 500 }).map((n) => Buffer.from(`${'['.repeat(n)}${']'.repeat(n)}`)),
      fc.constantFrom('', ' ', '{}', ' {} ', '{"__proto__":{}}', '{"a":1}', '\ufeff{}', 'null', '[]', '""', '{}{}').map((s) => Buffer.from(s)),
    );
    const type = fc.constantFrom('application/json', 'text/plain', 'application/octet-stream', 'application/json; charset=utf-16', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '');
    const encoding = fc.constantFrom(undefined, 'gzip', 'deflate', 'br', 'identity', 'x-unknown');
    await fc.assert(
      fc.asyncProperty(body, type, encoding, async (b, t, enc) => {
        const headers: Record<string, string> = { ...auth };
        if (t) headers['content-type'] = t;
        if (enc) headers['content-encoding'] = enc;
        // An unknown tenant: a valid call ends in 404 tenant_not_found, so nothing is created.
        const a = await sendHttp(reg.baseUrl, 'POST', `/admin/tenants/${UNKNOWN_ID}/disable`, headers, b);
        expectContract(a, []);
      }),
      config,
    );
  });

  it('paths, methods, ids and list queries: contract 4xx or 200, never 500', async () => {
    const id = fc.oneof(
      fc.constantFrom(UNKNOWN_ID, UNKNOWN_ID.toUpperCase(), '%ZZ', '%', '%E0%A4%A', '%2e%2e', '..', 'x'.repeat(300), '%00', `${UNKNOWN_ID}%0A`, '%F0%9F%9A%80'),
      fc.string({ unit: fc.constantFrom(...'abcdef0123456789-%ZZ.~'), maxLength: 40 }),
    );
    const extreme = fc.date({ min: new Date(-8.64e15), max: new Date(8.64e15), noInvalidDate: true });
    const cursor = fc.oneof(
      fc.string({ maxLength: 30 }),
      fc.tuple(extreme, fc.constantFrom(UNKNOWN_ID, 'x')).map(([d, t]) => Buffer.from(JSON.stringify([d.toISOString(), t])).toString('base64url')),
      fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v) ?? '').toString('base64url')),
    );
    const query = fc
      .record({ limit: fc.oneof(fc.constantFrom('0', '1', '50', '100', '101', '-1', '1.5', '1e2', '', ' 5'), fc.string({ maxLength: 5 })), cursor }, { requiredKeys: [] })
      .map((r) => `?${new URLSearchParams(r as Record<string, string>).toString()}`);
    const path = fc.oneof(
      fc.tuple(id, fc.constantFrom('', '/disable', '/enable', '/jwt_secret/rotate', '/jwt_secret/expire_previous', '/jwt_secret/revoke_all', '/host_sync/rotate', '/nope', '/jwt_secret')).map(([i, s]) => `/admin/tenants/${i}${s}`),
      query.map((qs) => `/admin/tenants${qs}`),
      fc.constantFrom('/admin/tenants?limit=1&limit=2', '/admin/tenants?cursor[]=x', '/admin/tenants?cursor[a]=1', '/admin/tenants?limit[]=1', '/admin/', '/admin', '/admin/tenants/', '//admin/tenants', '/admin/%2e%2e/admin/tenants'),
    );
    await fc.assert(
      fc.asyncProperty(path, fc.constantFrom('GET', 'GET', 'POST', 'PUT', 'DELETE', 'PATCH'), async (p, method) => {
        const isCreate = method === 'POST' && /^\/admin\/tenants\/?(\?|$)/.test(p);
        fc.pre(!isCreate);
        const a = await sendHttp(reg.baseUrl, method, p, auth);
        expectContract(a, [200]);
      }),
      config,
    );
    expect(reg.logs()).not.toContain('request failed');
  });
});
