import { HostClientError } from './host-client-error.js';
import { fetchSigningSecret, type SecretFetchOptions } from './secret-fetch.js';
import { callServerApi, type ChannelPresence, type ServerMessage } from './server-api.js';
import { checkTenantId, DEFAULT_MAX_TOKEN_LIFETIME_S } from './token-rules.js';
import type { JsonValue } from './user-token.js';
import { checkUserTokenRequest, refuse, signToken, type UserTokenOptions } from './user-token.js';

export interface HostClientOptions {
  /** The gateway, e.g. http://127.0.0.1:8080 (the registry's HTTP port serves the same fetch). */
  baseUrl: string;
  /** The tenant id as issued (a lowercase UUID). */
  tenantId: string;
  /** host_sync_client_id and host_sync_client_secret as the operator handed them over. */
  clientId: string;
  clientSecret: string;
  /** How often the secret is fetched again in the background; default 60 000. 0 turns it off. */
  refreshIntervalMs?: number;
  /** Per fetch and per server API call; default 5000. */
  timeoutMs?: number;
  /** The relay's MAX_TOKEN_LIFETIME_S, when the operator changed it; default 86 400. signUserToken refuses longer lifetimes. */
  maxTokenLifetimeSeconds?: number;
  /** A background refresh failed; the cached secret stays in use (except after `invalid_credentials`). Default: ignored. */
  onRefreshError?: (err: HostClientError) => void;
  /**
   * The relay refused the host-sync credential (401 `invalid_credentials`) on
   * a fetch or a server API call: `revoke_all` or `rotate-host-sync` replaced
   * it, or the tenant was disabled. The cached signing secret is dropped
   * at once (after a `revoke_all` it is dead): signUserToken rejects with
   * `invalid_credentials` until `setCredentials` gives a credential that works.
   */
  onCredentialsRejected?: (err: HostClientError) => void;
  /** A fetch returned a different primary secret than the cached one (a rotation). */
  onSecretChange?: () => void;
  /** Injectable for tests. */
  fetch?: typeof fetch;
  /** Milliseconds since the epoch; injectable for tests. */
  now?: () => number;
}

export interface RefreshResult {
  /** True when the fetched secret differs from the one cached before (a rotation or revoke_all). */
  changed: boolean;
  /** The answer's ETag, when the server sent one. */
  etag: string | undefined;
}

export interface HostClient {
  /** Fetches the secret now (concurrent calls share one fetch); rejects with a HostClientError. */
  refresh(): Promise<RefreshResult>;
  /**
   * Signs a token for one of the host's users; fetches the secret first if
   * none is cached yet. Default lifetime 3600 s, no `cap`. A request the
   * relay would refuse rejects with `token_rule` before anything is fetched.
   */
  signUserToken(userId: string, opts?: UserTokenOptions): Promise<string>;
  /**
   * Replaces the host-sync credential of this running client (after
   * `revoke_all` or `rotate-host-sync` the operator hands over a new secret),
   * drops the cached signing secret and fetches again with the new credential.
   */
  setCredentials(credentials: { clientId?: string; clientSecret: string }): Promise<RefreshResult>;
  /** Publishes `data` to one channel as the server (`user_id: null`, `from: "server"`); no channel rule applies. */
  publish(channel: string, data: JsonValue, opts?: PublishOptions): Promise<ServerMessage>;
  /** Publishes one `data` to 1..100 channels in one call; the messages come back in the channels' order. */
  publishMany(channels: readonly string[], data: JsonValue, opts?: PublishOptions): Promise<ServerMessage[]>;
  /** Who is present on a channel (cluster-wide). */
  presence(channel: string): Promise<ChannelPresence>;
  /**
   * Closes every live connection of the user on every instance (close code
   * 4409: clients do not reconnect on their own). The user's tokens stay
   * valid; revoke them too to keep the user out.
   */
  disconnectUser(userId: string): Promise<void>;
  /**
   * From now on the user's tokens whose `iat` is absent or earlier than
   * `issuedBefore` (default: now; at most 60 s ahead) are refused on REST
   * and WebSocket, and live connections holding one are closed with 4401.
   * Tokens this client signs afterwards carry a later `iat` and work.
   * Resolves the moment in force (the latest ever asked for this user).
   */
  revokeUserTokens(userId: string, opts?: { issuedBefore?: number | Date }): Promise<{ issuedBefore: number }>;
  /** When the cached secret was fetched (ms since the epoch), or undefined when none is cached. */
  readonly fetchedAt: number | undefined;
  /** Stops the background refresh. */
  close(): void;
}

export interface PublishOptions {
  /** Retrying with the same key (per channel) stores nothing new and answers the first message. */
  idempotencyKey?: string;
}

export const DEFAULT_REFRESH_INTERVAL_MS = 60_000;
const DEFAULT_TIMEOUT_MS = 5_000;

interface Cached {
  secret: string;
  key: Uint8Array;
  fetchedAt: number;
}

/**
 * A host server's client: keeps the tenant's primary signing secret fetched
 * and fresh, and signs user tokens with it. A background refresh that fails
 * keeps the cached secret (it goes on verifying until expire_previous or
 * revoke_all), so a short relay outage does not stop the host issuing tokens;
 * a refused credential drops it (revoke_all killed it).
 */
export function createHostClient(opts: HostClientOptions): HostClient {
  for (const name of ['baseUrl', 'tenantId', 'clientId', 'clientSecret'] as const) {
    if (typeof opts[name] !== 'string' || opts[name].length === 0) throw new TypeError(`${name} must be a non-empty string`);
  }
  new URL(opts.baseUrl); // throws a TypeError on a malformed base URL
  const badTenant = checkTenantId(opts.tenantId);
  if (badTenant) throw new TypeError(badTenant.problem);
  const intervalMs = opts.refreshIntervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
  if (!Number.isFinite(intervalMs) || intervalMs < 0) throw new TypeError('refreshIntervalMs must be 0 or a positive number');
  const maxLifetimeS = opts.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_S;
  if (!Number.isSafeInteger(maxLifetimeS) || maxLifetimeS < 1) throw new TypeError('maxTokenLifetimeSeconds must be a positive integer');
  const now = opts.now ?? Date.now;
  // One object per credential: a call started with an older credential cannot drop what a newer one fetched.
  let fetchOpts: SecretFetchOptions = {
    baseUrl: opts.baseUrl,
    tenantId: opts.tenantId,
    clientId: opts.clientId,
    clientSecret: opts.clientSecret,
    timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    fetch: opts.fetch ?? globalThis.fetch,
  };
  let cached: Cached | undefined;
  // The last secret fetched, kept after a refused credential drops `cached`: a revoke_all still reads as a change.
  let lastSecret: string | undefined;
  let inflight: Promise<RefreshResult> | undefined;

  /** Every call with the credential goes through here: a 401 drops the cached secret and tells the host. */
  const withCredential = async <T>(call: (o: SecretFetchOptions) => Promise<T>): Promise<T> => {
    const used = fetchOpts;
    try {
      return await call(used);
    } catch (err) {
      if (err instanceof HostClientError && err.code === 'invalid_credentials' && used === fetchOpts) {
        cached = undefined;
        opts.onCredentialsRejected?.(err);
      }
      throw err;
    }
  };

  const publishMany = async (channels: readonly string[], data: JsonValue, publishOpts: PublishOptions = {}): Promise<ServerMessage[]> => {
    if (!Array.isArray(channels) || channels.length === 0) throw new TypeError('channels must be a non-empty array');
    const body = { channels, data, ...(publishOpts.idempotencyKey !== undefined && { idempotency_key: publishOpts.idempotencyKey }) };
    return ((await withCredential((o) => callServerApi(o, 'POST', 'messages', body))) as { messages: ServerMessage[] }).messages;
  };

  const refresh = (): Promise<RefreshResult> => {
    const used = fetchOpts;
    const p = (inflight ??= withCredential(async (o) => {
      try {
        const fetched = await fetchSigningSecret(o);
        if (used !== fetchOpts) return { changed: false, etag: fetched.etag }; // the credential changed meanwhile
        const changed = lastSecret !== undefined && lastSecret !== fetched.secret;
        lastSecret = fetched.secret;
        cached = { secret: fetched.secret, key: new TextEncoder().encode(fetched.secret), fetchedAt: now() };
        if (changed) opts.onSecretChange?.();
        return { changed, etag: fetched.etag };
      } finally {
        if (inflight === p) inflight = undefined;
      }
    }));
    return p;
  };

  let timer: ReturnType<typeof setInterval> | undefined;
  if (intervalMs > 0) {
    timer = setInterval(() => {
      refresh().catch((err: unknown) => {
        if (err instanceof HostClientError) opts.onRefreshError?.(err);
      });
    }, intervalMs);
    // Node: the refresh never keeps the process alive.
    (timer as { unref?: () => void }).unref?.();
  }

  return {
    refresh,
    async signUserToken(userId, tokenOpts = {}) {
      const breach = checkUserTokenRequest(userId, tokenOpts, maxLifetimeS);
      if (breach) refuse(breach);
      if (!cached) await refresh();
      // A refused credential between the fetch and here dropped the cache: say so rather than sign with nothing.
      if (!cached) throw new HostClientError('invalid_credentials', 'no signing secret: the host-sync credential was refused');
      return signToken(cached.key, opts.tenantId, userId, tokenOpts, maxLifetimeS, now());
    },
    async setCredentials(credentials) {
      const clientId = credentials.clientId ?? fetchOpts.clientId;
      for (const [name, value] of [['clientId', clientId], ['clientSecret', credentials.clientSecret]] as const) {
        if (typeof value !== 'string' || value.length === 0) throw new TypeError(`${name} must be a non-empty string`);
      }
      fetchOpts = { ...fetchOpts, clientId, clientSecret: credentials.clientSecret };
      cached = undefined;
      inflight = undefined;
      return refresh();
    },
    async publish(channel, data, publishOpts) {
      const [message] = await publishMany([channel], data, publishOpts);
      return message!;
    },
    publishMany,
    async presence(channel) {
      if (typeof channel !== 'string' || channel.length === 0) throw new TypeError('channel must be a non-empty string');
      return (await withCredential((o) => callServerApi(o, 'GET', `channels/${encodeURIComponent(channel)}/presence`))) as ChannelPresence;
    },
    async disconnectUser(userId) {
      const path = `users/${userPath(userId)}/disconnect`;
      await withCredential((o) => callServerApi(o, 'POST', path));
    },
    async revokeUserTokens(userId, revokeOpts = {}) {
      const at = revokeOpts.issuedBefore;
      const issuedBefore = at instanceof Date ? Math.floor(at.getTime() / 1000) : at;
      const path = `users/${userPath(userId)}/revoke_tokens`;
      const body = (await withCredential((o) => callServerApi(o, 'POST', path, issuedBefore === undefined ? {} : { issued_before: issuedBefore }))) as { issued_before: number };
      return { issuedBefore: body.issued_before };
    },
    get fetchedAt() {
      return cached?.fetchedAt;
    },
    close() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}

function userPath(userId: string): string {
  if (typeof userId !== 'string' || userId.length === 0) throw new TypeError('userId must be a non-empty string');
  return encodeURIComponent(userId);
}
