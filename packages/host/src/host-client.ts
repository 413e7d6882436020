import { HostClientError } from './host-client-error';
import { fetchSigningSecret } from './secret-fetch';
import { callServerApi, type ChannelPresence, type ServerMessage } from './server-api';
import type { JsonValue } from './user-token';
import { signToken, type UserTokenOptions } from './user-token';

export interface HostClientOptions {
  /** The gateway, e.g. http://127.0.0.1:8080 (the registry's HTTP port serves the same fetch). */
  baseUrl: string;
  tenantId: string;
  /** host_sync_client_id and host_sync_client_secret as the operator handed them over. */
  clientId: string;
  clientSecret: string;
  /** How often the secret is fetched again in the background; default 60 000. 0 turns it off. */
  refreshIntervalMs?: number;
  /** Per fetch and per server API call; default 5000. */
  timeoutMs?: number;
  /** A background refresh failed; the cached secret stays in use. Default: ignored. */
  onRefreshError?: (err: HostClientError) => void;
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
  /** Signs a token for one of the host's users; fetches the secret first if none is cached yet. */
  signUserToken(userId: string, opts: UserTokenOptions): Promise<string>;
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
  /** When the cached secret was fetched (ms since the epoch), or undefined before the first fetch. */
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
 * revoke_all), so a short relay outage does not stop the host issuing tokens.
 */
export function createHostClient(opts: HostClientOptions): HostClient {
  for (const name of ['baseUrl', 'tenantId', 'clientId', 'clientSecret'] as const) {
    if (typeof opts[name] !== 'string' || opts[name].length === 0) throw new TypeError(`${name} must be a non-empty string`);
  }
  new URL(opts.baseUrl); // throws a TypeError on a malformed base URL
  const intervalMs = opts.refreshIntervalMs ?? DEFAULT_REFRESH_INTERVAL_MS;
  if (!Number.isFinite(intervalMs) || intervalMs < 0) throw new TypeError('refreshIntervalMs must be 0 or a positive number');
  const now = opts.now ?? Date.now;
  const fetchOpts = {
    baseUrl: opts.baseUrl,
    tenantId: opts.tenantId,
    clientId: opts.clientId,
    clientSecret: opts.clientSecret,
    timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    fetch: opts.fetch ?? globalThis.fetch,
  };
  let cached: Cached | undefined;

  const publishMany = async (channels: readonly string[], data: JsonValue, publishOpts: PublishOptions = {}): Promise<ServerMessage[]> => {
    if (!Array.isArray(channels) || channels.length === 0) throw new TypeError('channels must be a non-empty array');
    const body = { channels, data, ...(publishOpts.idempotencyKey !== undefined && { idempotency_key: publishOpts.idempotencyKey }) };
    return ((await callServerApi(fetchOpts, 'POST', 'messages', body)) as { messages: ServerMessage[] }).messages;
  };
  let inflight: Promise<RefreshResult> | undefined;

  const refresh = (): Promise<RefreshResult> => {
    inflight ??= (async () => {
      try {
        const fetched = await fetchSigningSecret(fetchOpts);
        const changed = cached !== undefined && cached.secret !== fetched.secret;
        cached = { secret: fetched.secret, key: new TextEncoder().encode(fetched.secret), fetchedAt: now() };
        if (changed) opts.onSecretChange?.();
        return { changed, etag: fetched.etag };
      } finally {
        inflight = undefined;
      }
    })();
    return inflight;
  };

  let timer: NodeJS.Timeout | undefined;
  if (intervalMs > 0) {
    timer = setInterval(() => {
      refresh().catch((err: unknown) => {
        if (err instanceof HostClientError) opts.onRefreshError?.(err);
      });
    }, intervalMs);
    timer.unref();
  }

  return {
    refresh,
    async signUserToken(userId, tokenOpts) {
      if (!cached) await refresh();
      return signToken(cached!.key, opts.tenantId, userId, tokenOpts, now());
    },
    async publish(channel, data, publishOpts) {
      const [message] = await publishMany([channel], data, publishOpts);
      return message!;
    },
    publishMany,
    async presence(channel) {
      if (typeof channel !== 'string' || channel.length === 0) throw new TypeError('channel must be a non-empty string');
      return (await callServerApi(fetchOpts, 'GET', `channels/${encodeURIComponent(channel)}/presence`)) as ChannelPresence;
    },
    async disconnectUser(userId) {
      await callServerApi(fetchOpts, 'POST', `users/${userPath(userId)}/disconnect`);
    },
    async revokeUserTokens(userId, revokeOpts = {}) {
      const at = revokeOpts.issuedBefore;
      const issuedBefore = at instanceof Date ? Math.floor(at.getTime() / 1000) : at;
      const body = (await callServerApi(fetchOpts, 'POST', `users/${userPath(userId)}/revoke_tokens`, issuedBefore === undefined ? {} : { issued_before: issuedBefore })) as { issued_before: number };
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
