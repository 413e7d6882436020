import { resolve, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, DEFAULT_PORTS, EnvReader, readOpsListener, readPemFile, readRedisSettings, requireRedisWhenAlone, type Env, type KeyringEntry, type RedisSettings } from '@service-relay/core';
import { bearerToken, readConnectionLimits, type ConnectionLimits } from '@service-relay/edge';

/** The registry's PostgreSQL pools (DB_POOL_SIZE, DB_FEED_POOL_SIZE, DB_TIMEOUT_MS); see db/create-db.ts. */
export interface PoolSettings {
  /** Connections for admin calls, key lookups and host-sync checks. */
  max: number;
  /** Connections of the tenant feed alone (consumer reports and reads, propagation checks). */
  feedMax: number;
  /** One statement or transaction, from asking for a connection to its answer; past it `unavailable`. */
  timeoutMs: number;
}

export type DatabaseSettings =
  | { kind: 'postgres'; url: string; pool?: PoolSettings }
  /** Embedded PostgreSQL (PGlite) on disk. */
  | { kind: 'pglite'; dir: string };

export interface RegistryConfig {
  httpPort: number;
  grpcPort: number;
  /** REGISTRY_HTTP_HOST / REGISTRY_GRPC_HOST (else BIND_HOST, else 127.0.0.1). */
  httpHost: string;
  grpcHost: string;
  /** REGISTRY_OPS_PORT (9082): /healthz, /readyz and /metrics; the admin port serves /healthz only. */
  opsPort: number;
  /** REGISTRY_OPS_HOST (else BIND_HOST, else 127.0.0.1). */
  opsHost: string;
  /** Failed host-sync fetches per minute per client address and tenant id (HOST_FETCH_RATE_LIMIT). */
  hostFetchRateLimit: number;
  /** CALLBACK_ALLOW_HTTP: callback URLs may be plain http to any host, not only loopback (#32). */
  callbackAllowHttp: boolean;
  /** Failed host-sync calls per minute per client address across tenants; over it, 429 before the database (HOST_FETCH_ADDRESS_RATE_LIMIT). */
  hostFetchAddressRateLimit: number;
  dataDir: string;
  database: DatabaseSettings;
  redis: RedisSettings;
  adminToken: string;
  /** ADMIN_TOKEN_NEXT: accepted beside adminToken while clients move to it (docs/OPERATIONS.md "Rotating ADMIN_TOKEN"). */
  adminTokenNext: string | undefined;
  internalToken: string;
  /** INTERNAL_TOKEN and INTERNAL_TOKEN_NEXT while it is set: what this service accepts from callers. */
  acceptedInternalTokens: readonly string[];
  /**
   * SECRETS_KEYS (newest first) then SECRETS_KEY as k0: the keyring that
   * seals every stored secret (docs/OPERATIONS.md "Rotating SECRETS_KEY").
   */
  secretsKeys: readonly KeyringEntry[];
  /** The variable a keyring refusal at start names: SECRETS_KEYS when set, else SECRETS_KEY. */
  secretsKeysVariable: string;
  /** SECRETS_REENCRYPT_BATCH: rows re-sealed per transaction when a new key seals. */
  reencryptBatch: number;
  logLevel: string;
  /** How long an admin call waits for a change to be in force everywhere before answering 503 change_not_propagated. */
  propagationTimeoutMs: number;
  /** How long committed changes stay in the outbox (a consumer further behind resets). */
  feedRetentionMs: number;
  /** How long admin audit rows are kept (pruned hourly). */
  auditRetentionMs: number;
  /** How long usage rows are kept (USAGE_RETENTION_DAYS; pruned hourly). */
  usageRetentionMs: number;
  /** Failed admin authentications written to the audit log per minute; the rest are counted on the next row. */
  auditUnauthenticatedPerMinute: number;
  /**
   * REALTIME_URL: realtime's internal HTTP side, for the host server API's
   * publish and presence (#13). A comma-separated list, as the gateway takes
   * it (one shared setting can serve both); calls take them in turn.
   */
  realtimeUrls: readonly string[];
  /** The HTTP listener's caps and first-byte timeout, as the gateway's and realtime's (MAX_CONNECTIONS, MAX_CONNECTIONS_PER_ADDRESS, FIRST_BYTE_TIMEOUT_MS). */
  connectionLimits: ConnectionLimits;
  /**
   * VERIFIER_ADDR: an auth-verifier's gRPC address, for the admin API's
   * explain_token (the verifier alone judges tokens). Called only then.
   */
  verifierAddr: string;
  /**
   * CONSOLE_DIR: the operator console's built files (#31), served at
   * /console/ on this HTTP listener; default packages/console/dist of this
   * checkout (built by npm ci). `CONSOLE=false` serves none.
   */
  consoleDir: string | undefined;
  /** Webhook delivery (#32; docs/OPERATIONS.md "Webhooks"). */
  webhooks: WebhookSettings;
}

export interface WebhookSettings {
  /** WEBHOOK_ALLOW_HTTP: plain http:// endpoints anywhere, not only on loopback. */
  allowHttp: boolean;
  /** WEBHOOK_RETRY_FOR_S: an event not delivered this long after it happened is given up (default a day). */
  retryForMs: number;
  /** WEBHOOK_RETRY_BASE_MS / WEBHOOK_RETRY_MAX_MS: the first retry's delay, doubled per failure up to the cap, with jitter. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** WEBHOOK_BATCH_MAX events per request; WEBHOOK_BATCH_WAIT_MS: how long the first pending event waits for others. */
  batchMax: number;
  batchWaitMs: number;
  /** WEBHOOK_TIMEOUT_MS: a request not answered within this has failed. */
  timeoutMs: number;
  /** WEBHOOK_SENDER_LEASE_MS: one registry replica sends; another takes over this long after it stopped renewing. */
  leaseMs: number;
}

/** packages/console/dist beside this service in the repository. */
const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../../packages/console/dist', import.meta.url));

export interface LoadConfigOptions {
  /** True when this service runs in its own process (then REDIS_URL is required). */
  standalone: boolean;
}

/** The sslmode values node-postgres takes; every one but `disable` verifies the server's certificate and its name. */
const SSL_MODES = ['disable', 'require', 'verify-ca', 'verify-full'];
/** DATABASE_URL's TLS files, and libpq's variable for each (used when the URL does not name one). */
const PG_TLS_FILES = [
  ['sslrootcert', 'PGSSLROOTCERT', 'CERTIFICATE'],
  ['sslcert', 'PGSSLCERT', 'CERTIFICATE'],
  ['sslkey', 'PGSSLKEY', 'PRIVATE KEY'],
] as const;

/**
 * DATABASE_URL, with TLS checked at start (docs/OPERATIONS.md "TLS to Redis
 * and PostgreSQL"): `sslmode` one node-postgres honours, and the files of
 * `sslrootcert`, `sslcert` and `sslkey` readable PEM. libpq's PGSSLMODE,
 * PGSSLROOTCERT, PGSSLCERT and PGSSLKEY fill in what the URL leaves out
 * (node-postgres alone reads only PGSSLMODE, and no CA). The URL is never
 * echoed: it holds the password.
 */
export function readDatabaseUrl(r: EnvReader): string | undefined {
  const raw = r.optionalUrl('DATABASE_URL', ['postgres:', 'postgresql:']);
  if (raw === undefined) return undefined;
  const url = new URL(raw);
  let changed = false;
  const take = (param: string, env: string): { value: string; from: string } | undefined => {
    const inUrl = url.searchParams.get(param);
    if (inUrl !== null) return { value: inUrl, from: 'DATABASE_URL' };
    const value = r.raw(env);
    if (value === undefined) return undefined;
    url.searchParams.set(param, value);
    changed = true;
    return { value, from: env };
  };
  const mode = take('sslmode', 'PGSSLMODE');
  if (mode && !SSL_MODES.includes(mode.value)) {
    throw new ConfigError(mode.from, `sslmode must be one of ${SSL_MODES.join(', ')} (all but disable verify the server certificate and its name), got ${JSON.stringify(mode.value)}`);
  }
  if (url.searchParams.get('uselibpqcompat') !== null) throw new ConfigError('DATABASE_URL', 'uselibpqcompat is not supported: with it sslmode=require would not verify the server');
  const files: Record<string, string> = {};
  for (const [param, env, label] of PG_TLS_FILES) {
    const file = take(param, env);
    if (file === undefined) continue;
    readPemFile(file.from, file.value, label, file.from === 'DATABASE_URL' ? param : undefined);
    files[param] = file.value;
  }
  if ((files.sslcert === undefined) !== (files.sslkey === undefined)) throw new ConfigError('DATABASE_URL', 'sslcert and sslkey (or PGSSLCERT and PGSSLKEY) go together: a client certificate needs both');
  if (mode?.value === 'disable' && Object.keys(files).length > 0) throw new ConfigError(mode.from, 'sslmode is disable, but TLS files are named');
  return changed ? url.toString() : raw;
}

/** Reads and validates every variable once; a bad value throws a ConfigError naming it. */
export function loadConfig(env: Env, opts: LoadConfigOptions = { standalone: false }): RegistryConfig {
  const r = new EnvReader(env);
  const httpPort = r.port('REGISTRY_HTTP_PORT', DEFAULT_PORTS.REGISTRY_HTTP_PORT);
  const grpcPort = r.port('REGISTRY_GRPC_PORT', DEFAULT_PORTS.REGISTRY_GRPC_PORT);
  const dataDir = resolve(r.string('DATA_DIR', './.data'));
  const databaseUrl = readDatabaseUrl(r);
  const pool: PoolSettings = {
    max: r.int('DB_POOL_SIZE', 10, 1, 1000),
    feedMax: r.int('DB_FEED_POOL_SIZE', 3, 1, 100),
    timeoutMs: r.int('DB_TIMEOUT_MS', 600, 50, 60_000),
  };
  const database: DatabaseSettings = databaseUrl ? { kind: 'postgres', url: databaseUrl, pool: Object.freeze(pool) } : { kind: 'pglite', dir: join(dataDir, 'pg') };
  const redis = readRedisSettings(r);
  requireRedisWhenAlone(redis, opts.standalone);
  return Object.freeze({
    httpPort,
    grpcPort,
    httpHost: r.bindHost('REGISTRY_HTTP_HOST'),
    grpcHost: r.bindHost('REGISTRY_GRPC_HOST'),
    ...readOpsListener(r, 'REGISTRY', 'REGISTRY_HTTP_PORT', httpPort),
    hostFetchRateLimit: r.int('HOST_FETCH_RATE_LIMIT', 60, 1, 1_000_000),
    callbackAllowHttp: r.bool('CALLBACK_ALLOW_HTTP', false),
    hostFetchAddressRateLimit: r.int('HOST_FETCH_ADDRESS_RATE_LIMIT', 300, 1, 1_000_000),
    dataDir,
    database: Object.freeze(database),
    redis: Object.freeze(redis),
    adminToken: adminCredential(r, 'ADMIN_TOKEN'),
    adminTokenNext: r.raw('ADMIN_TOKEN_NEXT') === undefined ? undefined : adminCredential(r, 'ADMIN_TOKEN_NEXT'),
    ...r.internalTokens(),
    secretsKeys: Object.freeze(r.secretsKeyring()),
    secretsKeysVariable: r.raw('SECRETS_KEYS') === undefined ? 'SECRETS_KEY' : 'SECRETS_KEYS',
    reencryptBatch: r.int('SECRETS_REENCRYPT_BATCH', 100, 1, 10_000),
    logLevel: r.logLevel(),
    propagationTimeoutMs: r.int('PROPAGATION_TIMEOUT_MS', 3000, 100, 60_000),
    feedRetentionMs: r.int('FEED_RETENTION_S', 7 * 86_400, 60, 365 * 86_400) * 1000,
    auditRetentionMs: r.int('AUDIT_RETENTION_DAYS', 90, 1, 3650) * 86_400_000,
    usageRetentionMs: r.int('USAGE_RETENTION_DAYS', 400, 1, 3650) * 86_400_000,
    auditUnauthenticatedPerMinute: r.int('AUDIT_UNAUTHENTICATED_PER_MINUTE', 10, 0, 1000),
    realtimeUrls: r.urlList('REALTIME_URL', `http://127.0.0.1:${DEFAULT_PORTS.REALTIME_PORT}`),
    connectionLimits: Object.freeze(readConnectionLimits(r)),
    consoleDir: r.bool('CONSOLE', true) ? resolve(r.string('CONSOLE_DIR', DEFAULT_CONSOLE_DIR)) : undefined,
    verifierAddr: r.address('VERIFIER_ADDR', `127.0.0.1:${DEFAULT_PORTS.VERIFIER_GRPC_PORT}`),
    webhooks: Object.freeze({
      allowHttp: r.bool('WEBHOOK_ALLOW_HTTP', false),
      retryForMs: r.int('WEBHOOK_RETRY_FOR_S', 86_400, 1, 30 * 86_400) * 1000,
      retryBaseMs: r.int('WEBHOOK_RETRY_BASE_MS', 1000, 10, 3_600_000),
      retryMaxMs: r.int('WEBHOOK_RETRY_MAX_MS', 600_000, 10, 86_400_000),
      batchMax: r.int('WEBHOOK_BATCH_MAX', 100, 1, 1000),
      batchWaitMs: r.int('WEBHOOK_BATCH_WAIT_MS', 1000, 0, 60_000),
      timeoutMs: r.int('WEBHOOK_TIMEOUT_MS', 5000, 100, 60_000),
      leaseMs: r.int('WEBHOOK_SENDER_LEASE_MS', 5000, 500, 600_000),
    }),
  });
}

/** An admin token travels as `Authorization: Bearer <token>`: one the bearer grammar refuses could never log in. */
function adminCredential(r: EnvReader, name: string): string {
  const value = r.credential(name);
  if (bearerToken(`Bearer ${value}`) !== value) throw new ConfigError(name, 'must be usable as a bearer token: letters, digits and -._~+/ (trailing = allowed)');
  return value;
}
