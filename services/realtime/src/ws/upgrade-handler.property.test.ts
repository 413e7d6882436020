import fc from 'fast-check';
import { FakeVerifier, rawStatus } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueToken, startRealtime, type RealtimeInstance } from '../test-support/realtime-harness';

// Arbitrary Authorization headers on the WebSocket upgrade, written on a raw
// socket: the upgrade is accepted only for exactly `Bearer <known token>`
// (scheme in any case, spaces around), everything else is 401 (or Node's 400
// for bytes HTTP forbids), never 500, and the server goes on serving.
const config = { seed: 0x6a7e_0006, numRuns: 250 };

function upgradeStatus(port: number, authorization: string | undefined): Promise<number> {
  const auth = authorization === undefined ? '' : `Authorization: ${authorization}\r\n`;
  return rawStatus(
    port,
    Buffer.from(
      'GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n' + auth + '\r\n',
      'latin1',
    ),
  );
}

describe('WebSocket upgrade under arbitrary Authorization headers', () => {
  const verifier = new FakeVerifier();
  let rt: RealtimeInstance;
  let token: string;
  let port: number;

  beforeAll(async () => {
    await verifier.start();
    rt = await startRealtime({ verifier });
    token = issueToken(verifier).token;
    port = Number(new URL(rt.http).port);
  });
  afterAll(async () => {
    await rt?.stop();
    await verifier.stop();
  });

  it('accepted only for the exact bearer token; anything else 401 or 400, never 500', async () => {
    const scheme = fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Basic', 'Bearer:', 'Token', '');
    // Header bytes other than CR/LF (which would end the header): latin1, so each char is one byte.
    const byte = fc.integer({ min: 0, max: 255 }).filter((c) => c !== 10 && c !== 13).map((c) => String.fromCharCode(c));
    const mutated = fc.tuple(fc.nat(), byte, fc.constantFrom('insert', 'replace', 'delete')).map(([at, ch, how]) => {
      const i = at % token.length;
      return how === 'insert' ? token.slice(0, i) + ch + token.slice(i) : how === 'replace' ? token.slice(0, i) + ch + token.slice(i + 1) : token.slice(0, i) + token.slice(i + 1);
    });
    const credential = fc.oneof(fc.constant(token), mutated, fc.string({ unit: byte, maxLength: 60 }), fc.constant(`${token}, Bearer ${token}`), fc.constant(`"${token}"`));
    const header = fc.oneof(
      { weight: 5, arbitrary: fc.tuple(scheme, fc.constantFrom(' ', '  ', '\t', ''), credential, fc.constantFrom('', ' ', '  ', '\t')).map(([s, sep, c, tail]) => `${s}${sep}${c}${tail}`) },
      { weight: 1, arbitrary: fc.string({ unit: byte, maxLength: 100 }) },
      { weight: 1, arbitrary: fc.constant(undefined) },
    );
    await fc.assert(
      fc.asyncProperty(header, async (h) => {
        const status = await upgradeStatus(port, h);
        // Node trims spaces and tabs around a header value.
        const exact = h !== undefined && new RegExp(`^[ \\t]*bearer +${token} *[ \\t]*$`, 'i').test(h);
        if (exact) expect(status).toBe(101);
        else expect([400, 401]).toContain(status);
      }),
      config,
    );
    expect(await upgradeStatus(port, `Bearer ${token}`)).toBe(101);
    expect(rt.logs.join('')).not.toContain(token);
  });
});
