import { listen } from '@service-relay/core';
import { Agent, createServer, type IncomingMessage } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import { jwtVerify, type JWTHeaderParameters } from 'jose';
import { serveWorker } from '../lib/worker-runtime';

/**
 * What a user would hand-roll instead of our gateway: one express app, jose
 * `jwtVerify` as middleware (keys looked up by `kid`, as a multi-tenant app
 * must), and the same http-proxy-middleware with a keep-alive agent to the
 * same upstream, passing the verified identity the way the upstream expects.
 */

interface StartArgs {
  realtimeUrl: string;
  internalToken: string;
  secrets: Record<string, string>;
}

let server: ReturnType<typeof createServer> | undefined;
let agent: Agent | undefined;

async function start(args: StartArgs): Promise<{ port: number }> {
  const keys = new Map(Object.entries(args.secrets).map(([kid, secret]) => [kid, new TextEncoder().encode(secret)]));
  const keyFor = (header: JWTHeaderParameters): Uint8Array => {
    const key = header.kid === undefined ? undefined : keys.get(header.kid);
    if (!key) throw new Error('unknown kid');
    return key;
  };
  agent = new Agent({ keepAlive: true, maxFreeSockets: 256 });
  const app = express();
  app.disable('x-powered-by');
  app.use('/api/v1', async (req: Request, res: Response, next: NextFunction) => {
    const m = /^Bearer (.+)$/i.exec(req.headers.authorization ?? '');
    try {
      if (!m) throw new Error('no token');
      const { payload } = await jwtVerify(m[1]!, keyFor, { algorithms: ['HS256'], issuer: 'service-relay', audience: 'service-relay' });
      for (const name of Object.keys(req.headers)) if (name.startsWith('x-relay-')) delete req.headers[name];
      delete req.headers.authorization;
      req.headers['x-internal-token'] = args.internalToken;
      req.headers['x-relay-tenant-id'] = String(payload.tenant_id);
      req.headers['x-relay-user-id'] = String(payload.user_id);
      req.headers['x-relay-expires-at'] = String(payload.exp);
      next();
    } catch {
      res.status(401).set('www-authenticate', 'Bearer realm="service-relay", error="invalid_token"').json({ errors: ['invalid_or_missing_token'] });
    }
  });
  app.use(
    createProxyMiddleware<IncomingMessage>({
      target: args.realtimeUrl,
      agent,
      changeOrigin: true,
      pathFilter: '/api/v1',
    }),
  );
  server = createServer(app);
  return { port: await listen(server, 0, '127.0.0.1') };
}

serveWorker({ start }, () => {
  agent?.destroy();
  server?.closeAllConnections();
  server?.close();
});
