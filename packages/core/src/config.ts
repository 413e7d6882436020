import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseRedisUrl, RedisUrlError } from './redis';

export type Env = Readonly<Record<string, string | undefined>>;

/** A bad configuration value. main() prints `message` as one line and exits. */
export class ConfigError extends Error {
  constructor(readonly variable: string, problem: string) {
    super(`configuration error: ${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

/** Typed readers over an env record. Only config.ts files use them. */
export class EnvReader {
  constructor(private readonly env: Env) {}

  raw(name: string): string | undefined {
    const v = this.env[name];
    return v === undefined || v === '' ? undefined : v;
  }

  string(name: string, fallback?: string): string {
    const v = this.raw(name) ?? fallback;
    if (v === undefined) throw new ConfigError(name, 'is required');
    return v;
  }

  optional(name: string): string | undefined {
    return this.raw(name);
  }

  int(name: string, fallback: number, min: number, max: number): number {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    if (!/^-?\d+$/.test(v)) throw new ConfigError(name, `must be an integer, got ${JSON.stringify(v)}`);
    const n = Number(v);
    if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
    return n;
  }

  port(name: string, fallback: number): number {
    return this.int(name, fallback, 0, 65535);
  }

  bool(name: string, fallback: boolean): boolean {
    const v = this.raw(name);
    if (v === undefined) return fallback;
    if (v === 'true' || v === '1') return true;
    if (v === 'false' || v === '0') return false;
    throw new ConfigError(name, `must be true or false, got ${JSON.stringify(v)}`);
  }

  oneOf<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    const v = this.raw(name) ?? fallback;
    if (!choices.includes(v as T)) throw new ConfigError(name, `must be one of ${choices.join(', ')}`);
    return v as T;
  }

  url(name: string, protocols: readonly string[], fallback?: string): string {
    const v = this.string(name, fallback);
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      throw new ConfigError(name, 'is not a valid URL');
    }
    if (!protocols.includes(u.protocol)) throw new ConfigError(name, `must use ${protocols.join(' or ')}`);
    return v;
  }

  /**
   * A comma-separated list of http(s) base URLs (one gateway in front of
   * several realtime instances or registry replicas): each entry follows the
   * single-URL rules, trailing slashes dropped, no entry empty or repeated.
   */
  urlList(name: string, fallback: string): readonly string[] {
    const raw = this.optional(name);
    if (raw === undefined) return Object.freeze([fallback]);
    const items = raw.split(',').map((s) => s.trim());
    if (items.some((s) => s.length === 0)) throw new ConfigError(name, 'has an empty entry (a list is comma-separated URLs)');
    const urls = items.map((item) => new EnvReader({ [name]: item }).url(name, ['http:', 'https:'], fallback).replace(/\/+$/, ''));
    if (new Set(urls).size !== urls.length) throw new ConfigError(name, 'lists the same URL twice');
    return Object.freeze(urls);
  }

  optionalUrl(name: string, protocols: readonly string[]): string | undefined {
    return this.raw(name) === undefined ? undefined : this.url(name, protocols);
  }

  /** host:port for gRPC peers. */
  address(name: string, fallback: string): string {
    const v = this.string(name, fallback);
    if (!/^[A-Za-z0-9.\-_[\]:]+:\d{1,5}$/.test(v)) throw new ConfigError(name, 'must be host:port');
    return v;
  }

  /**
   * One gRPC peer, or several replicas of it: `host:port`, or a
   * comma-separated list of IP `addr:port` entries (all IPv4, or all
   * `[IPv6]:port`). A list becomes grpc-js's `ipv4:`/`ipv6:` target, whose
   * pick_first policy connects to the first entry that answers and moves to
   * the next when that one goes away. Host names are not accepted in a list
   * (grpc-js resolves one name per target: name one DNS name that resolves
   * to every replica instead, e.g. a headless Service).
   */
  addressList(name: string, fallback: string): string {
    const v = this.string(name, fallback);
    if (!v.includes(',')) return this.address(name, fallback);
    const items = v.split(',').map((s) => s.trim());
    if (items.some((s) => s.length === 0)) throw new ConfigError(name, 'has an empty entry (a list is comma-separated addr:port)');
    if (new Set(items).size !== items.length) throw new ConfigError(name, 'lists the same address twice');
    if (items.every((s) => IPV4_PORT.test(s))) return `ipv4:${items.join(',')}`;
    if (items.every((s) => IPV6_PORT.test(s))) return `ipv6:${items.join(',')}`;
    throw new ConfigError(name, 'as a list must name IP addresses, all IPv4 (10.0.0.1:50052) or all IPv6 ([fd00::1]:50052), not host names');
  }

  /**
   * A shared credential: at least `minLength` characters and not obviously
   * guessable (see weakCredential). Never echoed. ALLOW_INSECURE_SECRETS=true
   * lifts the strength rules for local development only.
   */
  credential(name: string, minLength = 32): string {
    const v = this.raw(name);
    if (v === undefined) throw new ConfigError(name, 'is required');
    const weak = this.insecureSecretsAllowed() ? undefined : weakCredential(v, minLength);
    if (weak) throw new ConfigError(name, `${weak}${INSECURE_HINT}`);
    return v;
  }

  /**
   * INTERNAL_TOKEN and, during a rotation, INTERNAL_TOKEN_NEXT
   * (docs/OPERATIONS.md "Rotating INTERNAL_TOKEN"): a service sends
   * INTERNAL_TOKEN and accepts either.
   */
  internalTokens(): { internalToken: string; acceptedInternalTokens: readonly string[] } {
    const internalToken = this.credential('INTERNAL_TOKEN');
    if (this.raw('INTERNAL_TOKEN_NEXT') === undefined) return { internalToken, acceptedInternalTokens: [internalToken] };
    const next = this.credential('INTERNAL_TOKEN_NEXT');
    if (next === internalToken) throw new ConfigError('INTERNAL_TOKEN_NEXT', 'equals INTERNAL_TOKEN (set it to the new value during a rotation, or unset it)');
    return { internalToken, acceptedInternalTokens: [internalToken, next] };
  }

  /** SECRETS_KEY: exactly 32 bytes in base64, and not a placeholder such as all zeros. */
  secretsKey(name = 'SECRETS_KEY'): Buffer {
    const v = this.raw(name);
    if (v === undefined) throw new ConfigError(name, 'is required (32 random bytes in base64: openssl rand -base64 32)');
    const key = Buffer.from(v, 'base64');
    if (key.length !== 32 || key.toString('base64') !== v.trim()) {
      throw new ConfigError(name, 'must be 32 bytes in base64 (openssl rand -base64 32)');
    }
    // 32 random bytes have ~30 distinct values; fewer than 8 is a placeholder (all zeros, one repeated byte).
    if (!this.insecureSecretsAllowed() && new Set(key).size < MIN_DISTINCT) {
      throw new ConfigError(name, `is a placeholder, not random bytes (openssl rand -base64 32)${INSECURE_HINT}`);
    }
    return key;
  }

  /** The development escape hatch for the secret-strength rules (never for production). */
  insecureSecretsAllowed(): boolean {
    return this.bool('ALLOW_INSECURE_SECRETS', false);
  }

  /**
   * A listener's bind address: its own variable, else BIND_HOST, else
   * 127.0.0.1 (nothing is reachable from other hosts unless asked for).
   */
  bindHost(name: string): string {
    const own = this.raw(name);
    const chosen = own === undefined ? 'BIND_HOST' : name;
    const v = own ?? this.raw('BIND_HOST') ?? DEFAULT_BIND_HOST;
    if (!/^[A-Za-z0-9.\-:]{1,253}$/.test(v)) throw new ConfigError(chosen, `must be an IP address or host name, got ${JSON.stringify(v)}`);
    return v;
  }

  logLevel(): string {
    return this.oneOf('LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info');
  }
}

const PORT = '(6553[0-5]|655[0-2]\\d|65[0-4]\\d{2}|6[0-4]\\d{3}|[1-5]\\d{4}|[1-9]\\d{0,3})';
const IPV4_PORT = new RegExp(`^((25[0-5]|2[0-4]\\d|1?\\d?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1?\\d?\\d):${PORT}$`);
const IPV6_PORT = new RegExp(`^\\[[0-9A-Fa-f:.]+\\]:${PORT}$`);
const INSECURE_HINT = ' (ALLOW_INSECURE_SECRETS=true accepts it for local development only)';
const MIN_DISTINCT = 8;
// The shapes of values people paste from examples instead of generating one.
const PLACEHOLDER = /change[-_. ]?me|changeit|placeholder|replace[-_. ]?me|example|your[-_. ]?(admin|internal|secret|token|key)/i;

/** Why a credential is too weak to run with, or undefined when it is acceptable. */
export function weakCredential(value: string, minLength = 32): string | undefined {
  if (value.length < minLength) return `must be at least ${minLength} characters`;
  if (PLACEHOLDER.test(value)) return 'is a placeholder value (generate one: openssl rand -base64 32)';
  // A random value of 32+ characters has far more distinct characters; this catches "aaaa…", "0000…", "abab…".
  if (new Set(value).size < MIN_DISTINCT) return 'is not random enough (fewer than 8 different characters)';
  return undefined;
}

/** Where every listener binds unless told otherwise. */
export const DEFAULT_BIND_HOST = '127.0.0.1';

export const GENERATED_SECRET_NAMES = ['ADMIN_TOKEN', 'INTERNAL_TOKEN', 'SECRETS_KEY'] as const;

export interface EmbeddedSecrets {
  file: string;
  created: boolean;
  values: Record<(typeof GENERATED_SECRET_NAMES)[number], string>;
}

/**
 * The embedded default: credentials missing from the environment are generated
 * once into DATA_DIR/secrets.env (mode 0600) and reused on every later start.
 */
export function loadOrCreateEmbeddedSecrets(dataDir: string): EmbeddedSecrets {
  const dir = resolve(dataDir);
  const file = join(dir, 'secrets.env');
  if (existsSync(file)) {
    const values = parseEnvFile(readFileSync(file, 'utf8'));
    for (const name of GENERATED_SECRET_NAMES) {
      if (!values[name]) throw new ConfigError(name, `is missing from ${file}`);
    }
    return { file, created: false, values: values as EmbeddedSecrets['values'] };
  }
  mkdirSync(dir, { recursive: true });
  const values = {
    ADMIN_TOKEN: randomBytes(32).toString('base64url'),
    INTERNAL_TOKEN: randomBytes(32).toString('base64url'),
    SECRETS_KEY: randomBytes(32).toString('base64'),
  };
  const text = GENERATED_SECRET_NAMES.map((n) => `${n}=${values[n]}`).join('\n') + '\n';
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { file, created: true, values };
}

export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split(/\r?\n/)) {
    const m = /^\s*([A-Z_][A-Z0-9_]*)\s*=\s*(.*?)\s*$/.exec(line);
    if (m) out[m[1]!] = m[2]!.replace(/^(['"])(.*)\1$/, '$2');
  }
  return out;
}

/** Ports and peer addresses every service agrees on (CONTRACT.md). */
export const DEFAULT_PORTS = {
  GATEWAY_PORT: 8080,
  REALTIME_PORT: 8081,
  REGISTRY_HTTP_PORT: 8082,
  REGISTRY_GRPC_PORT: 50052,
  VERIFIER_GRPC_PORT: 50051,
  VERIFIER_HTTP_PORT: 8083,
} as const;

export interface RedisSettings {
  url: string | undefined;
  /** Prefix of every key and channel, so several deployments or tests can share one server. */
  prefix: string;
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
  return { url, prefix };
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

/** How a consumer service (verifier, gateway, realtime) reaches the tenant feed. */
export interface TenantFeedConfig {
  /** The registry's gRPC port (TenantFeed, KeyService): host:port, or a grpc-js `ipv4:`/`ipv6:` target naming several replicas. */
  registryAddr: string;
  /** TENANT_LEASE_MS: how long the consumer trusts its caches after its last confirmation that it is current. */
  leaseMs: number;
}

export function readTenantFeedConfig(r: EnvReader): TenantFeedConfig {
  return {
    registryAddr: r.addressList('REGISTRY_GRPC_ADDR', `127.0.0.1:${DEFAULT_PORTS.REGISTRY_GRPC_PORT}`),
    leaseMs: r.int('TENANT_LEASE_MS', 2000, 200, 60_000),
  };
}

/** The process environment: handed to a service's config loader by runService, and read nowhere else. */
export function processEnvironment(): Env {
  return process.env;
}
