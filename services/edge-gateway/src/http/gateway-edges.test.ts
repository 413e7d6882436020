import { connect, type Socket } from 'node:net';
import { fakeIdentity, rawExchange as raw } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';


describe('edge-gateway: small inputs, logs and connection limits', () => {
  let h: GatewayHarness;
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { FIRST_BYTE_TIMEOUT_MS: '400', MAX_CONNECTIONS_PER_ADDRESS: '20' } });
  });
  afterAll(() => h.stop());
  const port = () => h.gateway.port;

  it('refuses more header fields than MAX_REQUEST_HEADERS with 431 and the contract JSON, and forwards nothing', async () => {
    const many = Array.from({ length: 1000 }, (_v, i) => `x-h${i}: v\r\n`).join('');
    const answer = await raw(port(), `GET /api/v1/me HTTP/1.1\r\n${many}host: x\r\nauthorization: Bearer t\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
    expect(answer).toMatch(/content-type: application\/json/i);
    expect(answer.endsWith('{"errors":["headers_too_large"]}')).toBe(true);
    const fine = Array.from({ length: 90 }, (_v, i) => `x-h${i}: v\r\n`).join('');
    expect(await raw(port(), `GET /healthz HTTP/1.1\r\n${fine}host: x\r\nconnection: close\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
    expect(h.realtime.requests).toHaveLength(0);
  });

  it('logs no query value, whatever the parameter is called', async () => {
    const token = 'eyJhbGciOiJIUzI1NiJ9.eyJzZWNyZXQiOiJ5ZXMifQ.c2lnbmF0dXJl';
    await fetch(`${h.url}/api/v1/me?jwt=${token}&limit=5&${token}`);
    const line = h.logs.filter((l) => l.includes('"request"') && l.includes('/api/v1/me?')).at(-1)!;
    expect(line).toContain('jwt=[redacted]&limit=[redacted]&[redacted]');
    expect(h.logs.join('')).not.toContain(token);
  });

  it("logs why a token was refused at info level: the verifier's reason, never the token", async () => {
    const token = 'tok-nobody-knows-this-one';
    expect((await fetch(`${h.url}/api/v1/me`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(401);
    const refused = h.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'token refused');
    expect(refused.at(-1)).toMatchObject({ level: 30, reason: 'unknown_token' });
    expect(h.logs.join('')).not.toContain(token);
  });

  it('sends INTERNAL_TOKEN to the verifier (the harness verifier refuses calls without it)', async () => {
    h.verifier.allow('tok-ok', fakeIdentity());
    expect((await fetch(`${h.url}/api/v1/me`, { headers: { authorization: 'Bearer tok-ok' } })).status).toBe(200);
  });

  it('closes a connection that never sends a byte within FIRST_BYTE_TIMEOUT_MS', async () => {
    const t0 = Date.now();
    const answer = await raw(port(), '', 5000);
    expect(answer).toBe('');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
    expect(Date.now() - t0).toBeLessThan(3000);
  });
});

describe('edge-gateway: per-address connection cap', () => {
  let h: GatewayHarness;
  const open: Socket[] = [];
  beforeAll(async () => {
    h = await startGatewayHarness({ env: { MAX_CONNECTIONS_PER_ADDRESS: '3' } });
  });
  afterAll(async () => {
    for (const s of open) s.destroy();
    await h.stop();
  });

  it('refuses the fourth connection from one address with a 503 while the others are served', async () => {
    for (let i = 0; i < 3; i++) {
      open.push(await new Promise<Socket>((resolve) => {
        const s = connect(h.gateway.port, '127.0.0.1', () => resolve(s));
      }));
    }
    const answer = await raw(h.gateway.port, 'GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer.endsWith('{"errors":["unavailable"]}')).toBe(true);
    // An open one still works.
    const first = open[0]!;
    first.write('GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n');
    expect(await new Promise<string>((resolve) => first.once('data', (d: Buffer) => resolve(d.toString())))).toMatch(/^HTTP\/1\.1 200 /);
  });
});
