import type { IncomingHttpHeaders } from 'node:http';
import { rawExchange } from '@service-relay/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { startGatewayHarness, type GatewayHarness } from '../testing/gateway-harness';
import { startStubWsUpstream, type StubWsUpstream } from '../testing/stub-ws-upstream';

/** What `npm start` does (#34): realtime in the same process takes each /ws upgrade on the client's own socket. */
describe('edge-gateway: /ws upgrades handed to realtime in the same process', () => {
  let piped: StubWsUpstream;
  let h: GatewayHarness;
  const wss = new WebSocketServer({ noServer: true });
  const handedOver: { url: string; headers: IncomingHttpHeaders }[] = [];

  beforeAll(async () => {
    // REALTIME_URL still names an upstream: a handoff must never reach it.
    piped = await startStubWsUpstream();
    h = await startGatewayHarness({
      realtime: piped,
      wsHandoff: (req, socket, head) => {
        handedOver.push({ url: req.url ?? '', headers: { ...req.headers } });
        wss.handleUpgrade(req, socket, head, (ws) => ws.on('message', (d) => ws.send(`in-process:${String(d)}`)));
      },
    });
  });
  afterAll(async () => {
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    await h.stop();
    await piped.close();
  });

  it('hands the upgrade over on the same socket, without the identity headers only the gateway may set, and counts it', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${h.gateway.port}/ws?access_token=t`, {
      headers: { 'x-relay-tenant-id': 'forged', 'x-internal-token': 'forged', 'x-request-id': 'req-7' },
    });
    const reply = await new Promise<string>((resolve, reject) => {
      ws.once('open', () => ws.send('hi'));
      ws.once('message', (d) => resolve(String(d)));
      ws.once('error', reject);
    });
    ws.close();
    expect(reply).toBe('in-process:hi');
    expect(handedOver).toHaveLength(1);
    expect(handedOver[0]!.url).toBe('/ws?access_token=t');
    expect(handedOver[0]!.headers['x-request-id']).toBe('req-7');
    for (const name of ['x-relay-tenant-id', 'x-internal-token']) expect(handedOver[0]!.headers[name]).toBeUndefined();
    expect(piped.upgrades).toHaveLength(0);
    const metrics = await (await fetch(`${h.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/^gateway_ws_upgrades_handed_off_total\{[^}]*\} 1$/m);
  });

  it('keeps the edge rules first: another path is 404 and a request without Host is 400, neither handed over', async () => {
    const before = handedOver.length;
    const upgrade = (path: string, host: string) =>
      rawExchange(h.gateway.port, `GET ${path} HTTP/1.1\r\n${host}connection: Upgrade\r\nupgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`, 500);
    expect(await upgrade('/other', 'host: x\r\n')).toMatch(/^HTTP\/1\.1 404 /);
    expect(await upgrade('/ws', '')).toMatch(/^HTTP\/1\.1 400 /);
    expect(handedOver).toHaveLength(before);
  });
});
