import { createServer, type IncomingHttpHeaders } from 'node:http';
import { closeServer, listen } from '@service-relay/core';
import { rawErrorResponse, WWW_AUTHENTICATE } from '@service-relay/edge';
import { WebSocketServer, type WebSocket } from 'ws';
import { echoHandler, type StubHandler, type StubRequest, type StubUpstream } from './stub-upstream';

export interface StubWsUpstream extends StubUpstream {
  /** Headers and URL of every upgrade that reached the stub. */
  readonly upgrades: { url: string; headers: IncomingHttpHeaders }[];
  /** Open server-side sockets. */
  readonly sockets: Set<WebSocket>;
}

/** Realtime's shape for the gateway: the token is `good` (header or access_token), anything else is realtime's 401. */
export const GOOD_TOKEN = 'good';

/**
 * A stand-in for realtime with both sides: REST requests are echoed (like
 * StubUpstream), upgrades on /ws are accepted when they carry GOOD_TOKEN and
 * every text frame is echoed back prefixed with `echo:`.
 */
export async function startStubWsUpstream(handler: StubHandler = echoHandler): Promise<StubWsUpstream> {
  const requests: StubRequest[] = [];
  const upgrades: { url: string; headers: IncomingHttpHeaders }[] = [];
  const sockets = new Set<WebSocket>();
  const wss = new WebSocketServer({ noServer: true });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/healthz') return void res.end('{"status":"ok"}');
      const r: StubRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      requests.push(r);
      stub.handler(r, res);
    });
  });
  server.on('upgrade', (req, socket, head) => {
    upgrades.push({ url: req.url ?? '', headers: req.headers });
    const url = new URL(req.url ?? '/', 'http://stub');
    const token = req.headers.authorization?.replace(/^Bearer /, '') ?? url.searchParams.get('access_token');
    if (url.pathname !== '/ws' || token !== GOOD_TOKEN) {
      socket.end(rawErrorResponse('invalid_or_missing_token', `WWW-Authenticate: ${WWW_AUTHENTICATE.invalidToken}\r\n`));
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      ws.on('close', () => sockets.delete(ws));
      ws.on('message', (data) => ws.send(`echo:${String(data)}`));
    });
  });
  const port = await listen(server, 0, '127.0.0.1');
  const stub: StubWsUpstream = {
    url: `http://127.0.0.1:${port}`,
    requests,
    upgrades,
    sockets,
    handler,
    close: async () => {
      for (const ws of sockets) ws.terminate();
      await closeServer(server);
    },
  };
  return stub;
}
