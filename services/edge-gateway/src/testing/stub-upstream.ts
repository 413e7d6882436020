import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from '@service-relay/core';

export interface StubRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type StubHandler = (req: StubRequest, res: ServerResponse) => void;

export interface StubUpstream {
  readonly url: string;
  /** Every request that reached the stub (health probes excluded). */
  readonly requests: StubRequest[];
  handler: StubHandler;
  close(): Promise<void>;
}

/** Echoes what arrived, so tests can assert on the headers the gateway sent. */
export const echoHandler: StubHandler = (req, res) => {
  const text = JSON.stringify({ method: req.method, url: req.url, headers: req.headers, body: req.body.toString('utf8') });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
};

/** A plain node:http server standing in for the registry or realtime. */
export async function startStubUpstream(handler: StubHandler = echoHandler): Promise<StubUpstream> {
  const requests: StubRequest[] = [];
  const stub = {
    url: '',
    requests,
    handler,
    close: () => closeServer(server),
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/healthz') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"status":"ok"}');
        return;
      }
      const r: StubRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      requests.push(r);
      stub.handler(r, res);
    });
  });
  const port = await listen(server, 0, '127.0.0.1');
  stub.url = `http://127.0.0.1:${port}`;
  return stub;
}
