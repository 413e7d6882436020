import fc from 'fast-check';
import { FakeVerifier, contractViolation, sendHttp, type AllowedErrors, type HttpAnswer } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayHeaders, issueToken, startRealtime, type RealtimeInstance } from '../test-support/realtime-harness';

// Arbitrary bodies, paths, queries and idempotency keys to the REST side (as
// the gateway would forward them): every answer is a contract status with a
// contract error body, never a 500. Seeded; fast-check prints the seed.
const config = { seed: 0x6a7e_0005, numRuns: 300 };
const ALLOWED: AllowedErrors = {
  400: ['invalid_body', 'invalid_channel', 'invalid_query'],
  403: ['forbidden_channel'],
  404: ['not_found'],
  405: ['method_not_allowed'],
  413: ['payload_too_large'],
};



function expectContract(a: HttpAnswer, ok: number[]): void {
  expect(contractViolation(a, ALLOWED, ok)).toBeUndefined();
}

describe('REST side under arbitrary requests', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  const { identity } = issueToken(verifier);
  const headers = gatewayHeaders(identity);

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
  });
  afterAll(async () => {
    await rt?.stop();
    await verifier.stop();
  });

  it('publish: arbitrary bodies and Idempotency-Keys answer 201, 400 invalid_body or 413, never 500', async () => {
    const body = fc.oneof(
      fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
      fc.string({ unit: 'binary', maxLength: 300 }).map((s) => Buffer.from(s)),
      fc.json({ maxDepth: 4 }).map((s) => Buffer.from(s)),
      fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify({ data: v }))),
      fc.integer({ min: 60, max: 5000 }).map((n) => Buffer.from(`{"data":${'['.repeat(n)}${']'.repeat(n)}}`)),
      fc.integer({ min: 60, max: 5000 }).map((n) => Buffer.from(`{"data":${'{"a":'.repeat(n)}1${'}'.repeat(n)}}`)),
      fc.constantFrom('{"data":1,"data":2}', '{"data":"\\ud800"}', '\ufeff{"data":1}', '{"__proto__":{"data":1}}', '{"data":null}', 'null', '[]', '').map((s) => Buffer.from(s)),
    );
    const key = fc.option(fc.oneof(fc.constantFrom('k1', 'a'.repeat(128), 'a'.repeat(129), 'x y', ''), fc.string({ unit: fc.constantFrom(...'ab:._-!~ %'), maxLength: 140 })), { nil: undefined });
    await fc.assert(
      fc.asyncProperty(body, key, fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'), async (b, k, type) => {
        const h: Record<string, string> = { ...headers, 'content-type': type };
        if (k !== undefined) h['idempotency-key'] = k;
        const a = await sendHttp(rt.http, 'POST', '/api/v1/channels/fuzz/messages', h, b);
        expectContract(a, [201]);
      }),
      config,
    );
  });

  it('paths, methods and history queries: contract 4xx or a 200, never 500', async () => {
    const seg = fc.oneof(
      fc.constantFrom('fuzz', '%', '%ZZ', '%E0%A4%A', '%2F', '%2e%2e', '..', 'a%00b', '%C0%AF', 'x'.repeat(200), '%F0%9F%9A%80', ''),
      fc.string({ unit: fc.constantFrom(...'aZ09_.:-%~!$&\'()*+,;=@'), maxLength: 30 }),
    );
    const query = fc.oneof(
      fc.constant(''),
      fc
        .record(
          {
            after: fc.oneof(fc.constantFrom('0-0', '1-1', '-1', '1e3-0', '999999999999999-999999999999999', '9999999999999999-0'), fc.string({ maxLength: 20 })),
            limit: fc.oneof(fc.constantFrom('0', '1', '100', '101', '-1', '1.5', '007', '1e2', ''), fc.string({ maxLength: 5 })),
            epoch: fc.oneof(fc.constantFrom('', 'a'.repeat(64), 'a'.repeat(65), '../'), fc.string({ maxLength: 10 })),
          },
          { requiredKeys: [] },
        )
        .map((r) => `?${new URLSearchParams(r as Record<string, string>).toString()}`),
      fc.constantFrom('?after=%', '?limit=%ZZ', '?after=0-0&after=1-1', '?&&&', '?=x'),
    );
    const path = fc.oneof(
      { weight: 3, arbitrary: fc.tuple(seg, query).map(([s, qs]) => `/api/v1/channels/${s}/messages${qs}`) },
      { weight: 1, arbitrary: fc.tuple(seg, seg).map(([a, b]) => `/api/v1/${a}/${b}`) },
      { weight: 1, arbitrary: fc.constantFrom('/api/v1/me', '/api/v1/', '/api/v1', '/api/v1//channels/a/messages', '/api/v1/channels/a/messages/', '/api/v1/me?x=%') },
    );
    await fc.assert(
      fc.asyncProperty(path, fc.constantFrom('GET', 'GET', 'HEAD', 'DELETE', 'PUT', 'OPTIONS', 'PATCH'), async (p, method) => {
        const a = await sendHttp(rt.http, method, p, headers);
        if (method === 'HEAD') expect(a.status).not.toBe(500);
        else expectContract(a, [200]);
      }),
      config,
    );
  });
});
