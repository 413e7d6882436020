import { fakeIdentity, rawExchange } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';

const ORIGIN = 'https://app.example';
const FIVE_MIB = 5 * 1024 * 1024;

/** Every request header docs/API.md and OPERATIONS.md tell a client it may send. */
const DOCUMENTED_REQUEST_HEADERS = ['authorization', 'content-type', 'idempotency-key', 'x-request-id', 'traceparent', 'tracestate'];

// #29 item 5: what a browser or a fetch client sends gets the documented answer.
describe('edge-gateway: CORS preflight and 413 as fetch clients see them', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { CORS_ORIGINS: ORIGIN } });
    h.verifier.allow('tok-ok', fakeIdentity());
  });
  afterAll(() => h.stop());

  it('the preflight of an allowed origin allows every documented request header, Idempotency-Key included', async () => {
    const res = await fetch(`${h.url}/api/v1/channels/general/messages`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': DOCUMENTED_REQUEST_HEADERS.join(',') },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').split(',').map((s) => s.trim().toLowerCase());
    for (const name of DOCUMENTED_REQUEST_HEADERS) expect(allowed, name).toContain(name);
  });

  const postBig = (path: string, body: Buffer | ReadableStream<Uint8Array>, extra: RequestInit = {}) =>
    fetch(`${h.url}${path}`, { method: 'POST', headers: { authorization: 'Bearer tok-ok', 'content-type': 'application/json' }, body, ...extra }).then(
      async (res) => ({ status: res.status, body: await res.text(), limit: res.headers.get('x-relay-limit') }),
      (err: Error & { cause?: { code?: string } }) => ({ status: 0, body: err.cause?.code ?? err.message, limit: null }),
    );

  it('20 of 20 Node fetch POSTs of a 5 MiB body (Content-Length) read the 413, one after another', async () => {
    const body = Buffer.alloc(FIVE_MIB, 'x');
    const answers = [];
    for (let i = 0; i < 20; i++) answers.push(await postBig('/api/v1/channels/general/messages', body));
    expect(answers.filter((a) => a.status === 413 && a.body === '{"errors":["payload_too_large"]}' && a.limit === '65536')).toHaveLength(20);
    expect(h.realtime.requests).toHaveLength(0);
  });

  it('the 413 is a lingering close: the 5 MiB body is read and dropped, so the same connection then serves the next request', async () => {
    const body = 'x'.repeat(FIVE_MIB);
    const raw = await rawExchange(
      h.gateway.port,
      `POST /api/v1/channels/general/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-ok\r\nContent-Length: ${body.length}\r\n\r\n${body}GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      5000,
    );
    expect(raw).toMatch(/^HTTP\/1\.1 413 /);
    expect(raw).toMatch(/HTTP\/1\.1 200 [^]*\{"status":"ok"/);
  });

  it('20 of 20 streamed (chunked) 5 MiB POSTs read the 413 too, and so does the host API', async () => {
    const answers = [];
    for (let i = 0; i < 20; i++) {
      const chunk = Buffer.alloc(64 * 1024, 'y');
      let sent = 0;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent >= FIVE_MIB) return controller.close();
          sent += chunk.length;
          controller.enqueue(chunk);
        },
      });
      const path = i % 2 === 0 ? '/api/v1/channels/general/messages' : '/api/host/tenants/00000000-0000-4000-8000-000000000000/messages';
      answers.push(await postBig(path, stream, { duplex: 'half' } as RequestInit));
    }
    expect(answers.filter((a) => a.status === 413 && a.body === '{"errors":["payload_too_large"]}')).toHaveLength(20);
  });
});
