import { randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { KEY_ID_PATTERN, LEGACY_KEY_ID, type KeyringEntry } from './keyring';

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
    return this.keyBytes(name, '', v);
  }

  /**
   * The keyring (docs/OPERATIONS.md "Rotating SECRETS_KEY"): SECRETS_KEYS,
   * `id:base64key` entries newest first, then SECRETS_KEY as the key k0
   * (oldest). Either or both; SECRETS_KEY alone is the keyring of k0. No
   * message ever contains a key.
   */
  secretsKeyring(): KeyringEntry[] {
    const list = this.raw('SECRETS_KEYS');
    const single = this.raw('SECRETS_KEY');
    if (list === undefined && single === undefined) {
      throw new ConfigError('SECRETS_KEY', 'is required (32 random bytes in base64: openssl rand -base64 32), or SECRETS_KEYS (id:key,… newest first)');
    }
    const entries: KeyringEntry[] = [];
    const items = list === undefined ? [] : list.split(',').map((s) => s.trim());
    if (items.some((s) => s === '')) throw new ConfigError('SECRETS_KEYS', 'has an empty entry (id:base64key entries, comma-separated, newest first)');
    for (const [i, item] of items.entries()) {
      const colon = item.indexOf(':');
      const id = colon < 0 ? '' : item.slice(0, colon);
      if (!KEY_ID_PATTERN.test(id)) {
        throw new ConfigError('SECRETS_KEYS', `entry ${i + 1} is not id:base64key with an id of 1-32 letters, digits, _ or - (e.g. k1:$(openssl rand -base64 32))`);
      }
      if (entries.some((e) => e.id === id)) throw new ConfigError('SECRETS_KEYS', `names key ${id} twice`);
      entries.push({ id, key: this.keyBytes('SECRETS_KEYS', ` (key ${id})`, item.slice(colon + 1)) });
    }
    if (single !== undefined) {
      if (entries.some((e) => e.id === LEGACY_KEY_ID)) {
        throw new ConfigError('SECRETS_KEYS', `names ${LEGACY_KEY_ID}, the id SECRETS_KEY stands for: give that key in one of the two, not both`);
      }
      entries.push({ id: LEGACY_KEY_ID, key: this.secretsKey() });
    }
    for (const [i, a] of entries.entries()) {
      const same = entries.slice(i + 1).find((b) => timingSafeEqual(a.key, b.key));
      if (same) throw new ConfigError('SECRETS_KEYS', `gives keys ${a.id} and ${same.id} the same value: each key id needs a key of its own`);
    }
    return entries;
  }

  /** `v` as a 32-byte key, or a ConfigError naming `name` (and `what`, e.g. " (key k1)"), never the value. */
  private keyBytes(name: string, what: string, v: string): Buffer {
    const key = Buffer.from(v, 'base64');
    if (key.length !== 32 || key.toString('base64') !== v.trim()) {
      throw new ConfigError(name, `${what.trim() ? `${what.trim()} ` : ''}must be 32 bytes in base64 (openssl rand -base64 32)`);
    }
    // 32 random bytes have ~30 distinct values; fewer than 8 is a placeholder (all zeros, one repeated byte).
    if (!this.insecureSecretsAllowed() && new Set(key).size < MIN_DISTINCT) {
      throw new ConfigError(name, `${what.trim() ? `${what.trim()} ` : ''}is a placeholder, not random bytes (openssl rand -base64 32)${INSECURE_HINT}`);
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
  /** The file's values: the two tokens, and SECRETS_KEY or SECRETS_KEYS (or both, during a rotation). */
  values: { ADMIN_TOKEN: string; INTERNAL_TOKEN: string; SECRETS_KEY?: string; SECRETS_KEYS?: string };
}

/**
 * The embedded default: credentials missing from the environment are generated
 * once into DATA_DIR/secrets.env (mode 0600) and reused on every later start.
 * The file may hold SECRETS_KEYS beside or instead of SECRETS_KEY (a rotation,
 * docs/OPERATIONS.md "Rotating SECRETS_KEY").
 */
export function loadOrCreateEmbeddedSecrets(dataDir: string): EmbeddedSecrets {
  const dir = resolve(dataDir);
  const file = join(dir, 'secrets.env');
  if (existsSync(file)) {
    const values = parseEnvFile(readFileSync(file, 'utf8'));
    for (const name of GENERATED_SECRET_NAMES) {
      if (!values[name] && !(name === 'SECRETS_KEY' && values.SECRETS_KEYS)) throw new ConfigError(name, `is missing from ${file}`);
    }
    const { ADMIN_TOKEN, INTERNAL_TOKEN, SECRETS_KEY, SECRETS_KEYS } = values as EmbeddedSecrets['values'];
    return { file, created: false, values: { ADMIN_TOKEN, INTERNAL_TOKEN, ...(SECRETS_KEY && { SECRETS_KEY }), ...(SECRETS_KEYS && { SECRETS_KEYS }) } };
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

/**
 * Fills what `env` lacks from the embedded secrets file: each token on its
 * own; the keyring whole (SECRETS_KEY and SECRETS_KEYS from the file only
 * when the environment sets neither). Undefined when nothing was missing.
 */
export function fillEmbeddedSecrets(env: Record<string, string | undefined>, dataDir: string): EmbeddedSecrets | undefined {
  const keyringSet = Boolean(env.SECRETS_KEY || env.SECRETS_KEYS);
  if (env.ADMIN_TOKEN && env.INTERNAL_TOKEN && keyringSet) return undefined;
  const secrets = loadOrCreateEmbeddedSecrets(dataDir);
  env.ADMIN_TOKEN ||= secrets.values.ADMIN_TOKEN;
  env.INTERNAL_TOKEN ||= secrets.values.INTERNAL_TOKEN;
  if (!keyringSet) {
    env.SECRETS_KEY = secrets.values.SECRETS_KEY;
    env.SECRETS_KEYS = secrets.values.SECRETS_KEYS;
  }
  return secrets;
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
  // The ops listeners (/healthz, /readyz, /metrics) of the services whose main HTTP port is not ops-only;
  // the verifier's HTTP port (8083) has only ever served those.
  GATEWAY_OPS_PORT: 9080,
  REALTIME_OPS_PORT: 9081,
  REGISTRY_OPS_PORT: 9082,
} as const;

export interface OpsListener {
  /** `<SERVICE>_OPS_PORT`: /healthz, /readyz and /metrics, nothing else (0: any free port). */
  opsPort: number;
  /** `<SERVICE>_OPS_HOST` (else BIND_HOST, else 127.0.0.1). */
  opsHost: string;
}

/**
 * A service's ops listener, separate from its public port (docs/OPERATIONS.md
 * "Health, readiness, metrics"). The two must differ unless both are 0 (any
 * free port, as tests use).
 */
export function readOpsListener(r: EnvReader, service: 'GATEWAY' | 'REALTIME' | 'REGISTRY', publicPortName: string, publicPort: number): OpsListener {
  const name = `${service}_OPS_PORT` as const;
  const opsPort = r.port(name, DEFAULT_PORTS[name]);
  if (opsPort !== 0 && opsPort === publicPort) throw new ConfigError(name, `must differ from ${publicPortName} (${publicPort}): /readyz and /metrics are served only on the ops port`);
  return { opsPort, opsHost: r.bindHost(`${service}_OPS_HOST`) };
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
