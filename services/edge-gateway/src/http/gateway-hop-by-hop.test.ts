import { fakeIdentity, rawStatus } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';

/** One request written byte for byte on its own connection; resolves with the status line's code. */
function sendRaw(url: string, head: string, body: string): Promise<number> {
  return rawStatus(Number(new URL(url).port), `${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

// A client's hop-by-hop headers once reached the upstream request; `Trailer`
// on a sized body made Node throw outside any handler and killed the process.
const HOP_BY_HOP: Array<[string, string]> = [
  ['Trailer', 'X-Foo'],
  ['TE', 'trailers'],
  ['Keep-Alive', 'timeout=5'],
  ['Upgrade', 'h2c'],
  ['Proxy-Authorization', 'Basic eDp5'],
  ['Proxy-Connection', 'keep-alive'],
  ['Connection', 'X-Listed-Hop'],
];

describe('edge-gateway: hop-by-hop headers', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGatewayHarness();
    h.verifier.allow('tok', fakeIdentity());
  });
  afterAll(async () => {
    await h.stop();
  });

  const paths = [
    { name: 'host-sync fetch (no credentials)', line: 'POST /api/host/tenants/x/jwt_secret/fetch HTTP/1.1', auth: '', upstream: () => h.registry },
    { name: 'tenant API (valid token)', line: 'POST /api/v1/channels/c/messages HTTP/1.1', auth: '\r\nAuthorization: Bearer tok', upstream: () => h.realtime },
  ];

  for (const p of paths) {
    for (const [name, value] of HOP_BY_HOP) {
      for (const body of ['', '{"data":1}']) {
        it(`${p.name}: ${name} with a ${body ? 'body' : 'zero-length body'} is dropped, not forwarded, and the gateway lives`, async () => {
          const before = p.upstream().requests.length;
          const extra = name === 'Connection' ? '\r\nX-Listed-Hop: 1' : '';
          const status = await sendRaw(h.url, `${p.line}\r\nHost: x${p.auth}\r\n${name}: ${value}${extra}`, body);
          expect(status).toBe(200);
          const seen = p.upstream().requests.slice(before);
          expect(seen).toHaveLength(1);
          const forwarded = Object.keys(seen[0]!.headers);
          // The gateway's own keep-alive agent sets its own Connection header.
          if (name === 'Connection') expect(seen[0]!.headers.connection).not.toMatch(/listed/i);
          else expect(forwarded).not.toContain(name.toLowerCase());
          expect(forwarded).not.toContain('x-listed-hop');
          expect(forwarded.filter((n) => n.startsWith('proxy-'))).toEqual([]);
          expect(seen[0]!.body.toString()).toBe(body);
          expect((await fetch(`${h.url}/healthz`)).status).toBe(200);
        });
      }
    }
  }
});
