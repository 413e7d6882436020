import { readFileSync } from 'node:fs';
import { ConfigError, type EnvReader } from './config';
import { parseRedisUrl, RedisUrlError, type RedisTls } from './redis';

// REDIS_URL, REDIS_PREFIX and REDIS_TLS_*, read and checked at start (split from config.ts).

export interface RedisSettings {
  url: string | undefined;
  /** Prefix of every key and channel, so several deployments or tests can share one server. */
  prefix: string;
  /** REDIS_TLS_*: CA, client certificate and server name for a `rediss…://` URL; undefined when none is set. */
  tls?: RedisTls | undefined;
}

/** The REDIS_TLS_* variables, each a PEM file but REDIS_TLS_SERVERNAME. */
const REDIS_TLS_FILES = [
  ['REDIS_TLS_CA_FILE', 'ca', 'CERTIFICATE'],
  ['REDIS_TLS_CERT_FILE', 'cert', 'CERTIFICATE'],
  ['REDIS_TLS_KEY_FILE', 'key', 'PRIVATE KEY'],
] as const;

/**
 * Reads a PEM file named by `name` at start, so a missing or wrong file stops
 * the service with one line naming the variable (never the file's content).
 */
export function readPemFile(name: string, path: string, label: 'CERTIFICATE' | 'PRIVATE KEY', part?: string): string {
  const what = part === undefined ? '' : `${part} `;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(name, `${what}names a file that cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'}): ${path}`);
  }
  if (!new RegExp(`-----BEGIN [A-Z ]*${label}-----`).test(text)) throw new ConfigError(name, `${what}names a file that holds no PEM ${label.toLowerCase()}: ${path}`);
  return text;
}

function readRedisTls(r: EnvReader, url: string | undefined): RedisTls | undefined {
  const tls: RedisTls = {};
  for (const [name, key, label] of REDIS_TLS_FILES) {
    const path = r.raw(name);
    if (path !== undefined) tls[key] = readPemFile(name, path, label);
  }
  const servername = r.raw('REDIS_TLS_SERVERNAME');
  if (servername !== undefined) {
    if (!/^[A-Za-z0-9.-]{1,253}$/.test(servername)) throw new ConfigError('REDIS_TLS_SERVERNAME', 'must be a host name');
    tls.servername = servername;
  }
  const set = Object.keys(tls);
  if (set.length === 0) return undefined;
  if ((tls.cert === undefined) !== (tls.key === undefined)) throw new ConfigError(tls.cert === undefined ? 'REDIS_TLS_CERT_FILE' : 'REDIS_TLS_KEY_FILE', 'is required with the other (a client certificate needs both)');
  // Set for a URL without TLS, they would silently do nothing: say so instead.
  if (url === undefined || !/^rediss(-sentinel|-cluster)?:\/\//.test(url)) {
    const first = [...REDIS_TLS_FILES.map(([n]) => n), 'REDIS_TLS_SERVERNAME'].find((n) => r.raw(n) !== undefined)!;
    throw new ConfigError(first, 'is set, but REDIS_URL does not use TLS (rediss://, rediss-sentinel:// or rediss-cluster://)');
  }
  return tls;
}

export function readRedisSettings(r: EnvReader): RedisSettings {
  const prefix = r.string('REDIS_PREFIX', 'relay:');
  if (!/^[A-Za-z0-9:_.-]{1,64}$/.test(prefix)) throw new ConfigError('REDIS_PREFIX', 'must be 1-64 characters of [A-Za-z0-9:_.-]');
  const url = r.raw('REDIS_URL');
  if (url !== undefined) {
    try {
      parseRedisUrl(url);
    } catch (err) {
      // The reason and the accepted forms, never the URL itself (it may hold a password).
      throw new ConfigError('REDIS_URL', err instanceof RedisUrlError ? err.message : 'is not a Redis URL');
    }
  }
  const tls = readRedisTls(r, url);
  return tls === undefined ? { url, prefix } : { url, prefix, tls };
}

/**
 * A service started alone (not through `npm start`, which runs all of them in
 * one process) needs REDIS_URL: the in-process bus cannot reach other processes.
 */
export function requireRedisWhenAlone(redis: RedisSettings, standalone: boolean): void {
  if (standalone && redis.url === undefined) {
    throw new ConfigError('REDIS_URL', 'is required when a service runs alone (unset is only valid with `npm start`, all services in one process)');
  }
}
