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

/** A URL with credential-bearing query parameters censored, for access logs. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of [...params.keys()]) {
    if (/token|secret|password|key/i.test(key)) params.set(key, '[redacted]');
  }
  return `${url.slice(0, q)}?${params.toString()}`;
}
