import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rawExchange } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authorizationOf, bearerToken, parseBasicAuthorization } from './authorization';

describe('authorizationOf', () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    // Answers with what each parser made of the request's Authorization.
    server = createServer((req, res) => {
      const header = authorizationOf(req);
      res.end(JSON.stringify({ header: header ?? null, bearer: bearerToken(header) ?? null, basic: parseBasicAuthorization(header) ?? null }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const ask = async (authorizationLines: string[]) => {
    const head = ['GET / HTTP/1.1', 'Host: x', 'Connection: close', ...authorizationLines.map((v) => `Authorization: ${v}`)].join('\r\n');
    const raw = await rawExchange(port, `${head}\r\n\r\n`);
    return JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as { header: string | null; bearer: string | null; basic: unknown };
  };

  it('one field: its value, parsed', async () => {
    expect(await ask(['Bearer abc.def'])).toEqual({ header: 'Bearer abc.def', bearer: 'abc.def', basic: null });
    expect((await ask([`Basic ${Buffer.from('id:s').toString('base64')}`])).basic).toEqual({ clientId: 'id', secret: 's' });
    expect(await ask([])).toEqual({ header: null, bearer: null, basic: null });
  });

  it('two fields (even the same credential twice) are joined and refused by every scheme', async () => {
    const basic = `Basic ${Buffer.from('id:s').toString('base64')}`;
    expect(await ask(['Bearer abc', 'Bearer abc'])).toEqual({ header: 'Bearer abc, Bearer abc', bearer: null, basic: null });
    expect(await ask([basic, basic])).toMatchObject({ bearer: null, basic: null });
  });

  it('comma-joined values, tabs and control characters are refused', () => {
    for (const h of ['Bearer a, Bearer b', 'Bearer a,b', 'Bearer\ta', 'Bearer a\tb', 'Bearer a\u0000', 'Bearer "a"', 'Bearer a\u0085']) expect(bearerToken(h), JSON.stringify(h)).toBeUndefined();
  });
});
