import { destination, pino, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';

export type { Logger } from 'pino';

// Anything that could carry a credential is censored by the logger itself, so a
// careless log call cannot leak it. Paths cover the shapes our code logs.
const REDACT_PATHS = [
  'authorization',
  'token',
  'secret',
  'password',
  'access_token',
  'jwt_secret_primary',
  'host_sync_client_secret',
  'headers.authorization',
  'headers.cookie',
  'headers["x-internal-token"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-internal-token"]',
  '*.authorization',
  '*.token',
  '*.secret',
  '*.password',
  '*.access_token',
  '*.jwt_secret_primary',
  '*.host_sync_client_secret',
  '*.internal_token',
  '*.admin_token',
];

export interface LoggerOptions {
  service: string;
  level?: string;
  /** Where lines go; tests pass a capture stream. Defaults to stdout. */
  destination?: DestinationStream;
}

export function createLogger(opts: LoggerOptions): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: { service: opts.service },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: stdTimeFunctions.isoTime,
    },
    opts.destination ?? destination({ fd: 1, sync: false }),
  );
}

/**
 * A URL for logs: every query value is replaced (a name list can never know
 * every parameter a client puts a token in, `?jwt=` being one), names are
 * kept when they look like names. A "name" that is long or unusual may be a
 * bare credential (`?eyJhbGci…`), so it is replaced too.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url
    .slice(q + 1)
    .split('&')
    .filter((p) => p.length > 0)
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      const safeName = PLAIN_NAME.test(name) ? name : '[redacted]';
      return eq < 0 ? safeName : `${safeName}=[redacted]`;
    });
  return `${url.slice(0, q)}?${parts.join('&')}`;
}

const PLAIN_NAME = /^[A-Za-z0-9_.\-[\]]{1,32}$/;
