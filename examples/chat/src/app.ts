import { createHash, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import express, { type Express, type Request, type Response } from 'express';
import type { HostClient } from '@service-relay/host';
import type { ChatConfig } from './config';

const PUBLIC_DIR = fileURLToPath(new URL('../public/', import.meta.url));
/** A demo login: any name of this shape is a user; the same name is the same user. */
const NAME = /^[A-Za-z0-9 _.-]{1,32}$/;
const NAME_RULE = "name must be 1 to 32 characters: letters, digits, spaces, '_', '.' or '-'";

interface Session {
  name: string;
  userId: string;
}

export interface ChatAppOptions {
  config: ChatConfig;
  tenantId: string;
  host: HostClient;
  /** Where the browser loads the client SDK's ESM build from (a directory with index.js). */
  clientSdkDir: string;
}

/**
 * The host app: a demo login that maps a name to a stable user id, and the
 * token endpoint the page calls at login and again before each expiry. A real
 * host would use its own sessions and users; the relay only ever sees the tokens.
 */
export function createChatApp(opts: ChatAppOptions): Express {
  const { config, tenantId, host } = opts;
  const sessions = new Map<string, Session>();

  const issue = async (s: Session) => {
    const token = await host.signUserToken(s.userId, { ttlSeconds: config.tokenTtlS });
    return { token, expires_at: Math.floor(Date.now() / 1000) + config.tokenTtlS };
  };

  const app = express();
  app.disable('x-powered-by');
  app.use(express.json({ limit: '1kb' }));
  app.use('/sdk', express.static(opts.clientSdkDir, { index: false }));
  app.use(express.static(PUBLIC_DIR));

  app.post('/api/login', async (req: Request, res: Response) => {
    const name = typeof req.body?.name === 'string' ? req.body.name.trim() : '';
    if (!NAME.test(name)) return res.status(400).json({ errors: ['invalid_name'], message: NAME_RULE });
    const session: Session = { name, userId: userIdFor(tenantId, name) };
    const id = randomBytes(24).toString('base64url');
    sessions.set(id, session);
    res.json({ session: id, name, user_id: session.userId, tenant_id: tenantId, channel: config.channel, ws_url: config.relayWsUrl, ...(await issue(session)) });
  });

  app.post('/api/token', async (req: Request, res: Response) => {
    const id = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1];
    const session = id === undefined ? undefined : sessions.get(id);
    if (!session) return res.status(401).json({ errors: ['invalid_session'], message: 'log in again' });
    res.json(await issue(session));
  });

  app.use((err: unknown, _req: Request, res: Response, _next: express.NextFunction) => {
    const status = (err as { status?: number }).status;
    if (status && status >= 400 && status < 500) return res.status(status).json({ errors: ['invalid_body'], message: 'a JSON body of at most 1 KiB' });
    console.error('chat: request failed', err);
    res.status(500).json({ errors: ['internal'] });
  });
  return app;
}

/** A name-based UUID (version 5) in the tenant's namespace: the same name is always the same user. */
export function userIdFor(tenantId: string, name: string): string {
  const namespace = Buffer.from(tenantId.replace(/-/g, ''), 'hex');
  const b = createHash('sha1').update(namespace).update(name.toLowerCase(), 'utf8').digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
