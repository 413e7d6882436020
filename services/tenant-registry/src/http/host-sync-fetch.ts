import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { errorBody, type Logger, type RateLimiter } from '@service-relay/core';
import { authorizationOf, parseBasicAuthorization, sendError, WWW_AUTHENTICATE } from '@service-relay/edge';
import type { FetchResult, RegistryMetrics } from '../metrics';
import type { BasicCredentials, HostSyncCheck } from '../tenants/host-sync-check';
import type { AddressFailureLimit } from './address-failure-limit';
import { NO_STORE } from './send';

const FETCH_PATH = /^\/api\/host\/tenants\/([^/]*)\/jwt_secret\/fetch\/?$/;

const NO_CACHE = { 'cache-control': 'no-store, private', pragma: 'no-cache' } as const;

// Every failure answers exactly these bytes, whatever the reason was.
const FAILURE_BODY = Buffer.from(errorBody('invalid_host_sync_credentials'));
const FAILURE_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(FAILURE_BODY.length),
  'www-authenticate': WWW_AUTHENTICATE.basic,
  ...NO_CACHE,
};

/** Failed fetches are counted per client address and tenant id (HOST_FETCH_RATE_LIMIT per minute). */
export interface HostFetchLimit {
  limiter: RateLimiter;
  /** The gateway's requests (internalCaller: they carry the internal token); only theirs may name the client address in x-relay-client-address. */
  fromGateway: (req: IncomingMessage) => boolean;
  /** Failures per client address across tenants (HOST_FETCH_ADDRESS_RATE_LIMIT); over it, 429 before the database. */
  addresses?: AddressFailureLimit;
}

/**
 * Every failure (401, or a 429 decided after the check) is answered no
 * sooner than this after the request came in. A tenant id the registry
 * already knows does not exist is refused without a database read
 * (store/tenant-store.ts, the negative cache); a known tenant with a wrong
 * credential costs one. The floor, far above a read's few milliseconds,
 * makes both take the same time, so timing does not tell them apart.
 */
export const FAILURE_FLOOR_MS = 50;

const MAX_ADDRESS_LENGTH = 64;

/**
 * POST /api/host/tenants/{tenant_id}/jwt_secret/fetch (seed section 4).
 * The tenant id is taken from the raw path, undecoded: anything that is not a
 * canonical UUID is simply a tenant that does not exist.
 *
 * Only failures count toward the rate limit, and the limit only ever turns a
 * failure's 401 into a 429: a host presenting the right credential is served
 * however many failures others caused from its address. Every failure,
 * known or unknown tenant, is counted and answered alike.
 */
export function hostSyncFetch(check: HostSyncCheck, metrics: RegistryMetrics, logger: Logger, limit?: HostFetchLimit) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const m = FETCH_PATH.exec(req.path);
    if (!m) return next();
    if (req.method !== 'POST') return sendError(res, 'method_not_allowed', { ...NO_STORE, allow: 'POST' });
    const tenantId = m[1]!;
    const primary = await hostCredentialGate(req, res, tenantId, (credentials) => check.fetchPrimaryKey(tenantId, credentials), { logger, limit, count: (result) => metrics.fetch(result) });
    if (primary === undefined) return;
    const body = JSON.stringify({ kid: tenantId, algorithm: 'HS256', issuer: 'service-relay', audience: 'service-relay', jwt_secret_primary: primary.secret });
    // The ETag names the primary's key version (a per-tenant counter), not the secret: a host
    // sees a rotation without comparing secrets, and nothing about the secret leaks.
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), etag: `"k${primary.keyVersion}"`, ...NO_CACHE });
    res.end(body);
  };
}

export interface GateOptions {
  logger: Logger;
  limit: HostFetchLimit | undefined;
  count: (result: FetchResult) => void;
}

/**
 * The host-sync credential check every host route goes through (the secret
 * fetch and the host server API, #13): HTTP Basic, the check's one code path,
 * failures counted toward the same rate limit and answered with the same
 * bytes. Resolves what `check` granted, or undefined once it has answered
 * (401, 429 or 503) itself.
 */
export async function hostCredentialGate<T>(
  req: Request,
  res: Response,
  tenantId: string,
  check: (credentials: BasicCredentials | undefined) => Promise<T | undefined>,
  opts: GateOptions,
): Promise<T | undefined> {
  const started = performance.now();
  const address = opts.limit && clientAddress(req, opts.limit.fromGateway);
  // An address over its failure limit is refused before anything is read: the same answer whatever it asks.
  const blockedS = address === undefined ? 0 : (opts.limit?.addresses?.retryAfterS(address) ?? 0);
  if (blockedS > 0) {
    opts.count('rate_limited');
    sendRateLimited(res, blockedS);
    return undefined;
  }
  let granted: T | undefined;
  try {
    granted = await check(parseBasicAuthorization(authorizationOf(req)));
  } catch (err) {
    opts.count('error');
    opts.logger.error({ err }, 'host-sync credential check failed');
    sendError(res, 'unavailable', NO_STORE);
    return undefined;
  }
  if (granted !== undefined) {
    opts.count('ok');
    return granted;
  }
  let retryAfterS = 0;
  if (opts.limit && address !== undefined) {
    const [perTenant, perAddressS] = await Promise.all([opts.limit.limiter.hit(limitKey(address, tenantId)), opts.limit.addresses?.failed(address) ?? 0]);
    retryAfterS = perTenant.allowed ? perAddressS : perTenant.retryAfterS;
  }
  const early = FAILURE_FLOOR_MS - (performance.now() - started);
  if (early > 0) await new Promise((r) => setTimeout(r, early));
  if (retryAfterS > 0) {
    opts.count('rate_limited');
    sendRateLimited(res, retryAfterS);
    return undefined;
  }
  opts.count('rejected');
  res.writeHead(401, FAILURE_HEADERS);
  res.end(FAILURE_BODY);
  return undefined;
}

/** The contract's rate-limit answer (the same bytes whichever limit it was). */
function sendRateLimited(res: Response, retryAfterS: number): void {
  sendError(res, 'rate_limited', { ...NO_STORE, ...NO_CACHE, 'retry-after': String(retryAfterS) });
}

/** The gateway's word for the client address when it proves itself, else the socket peer (a direct caller). */
function clientAddress(req: Request, fromGateway: (req: IncomingMessage) => boolean): string {
  const claimed = req.headers['x-relay-client-address'];
  if (typeof claimed === 'string' && claimed.length <= MAX_ADDRESS_LENGTH && fromGateway(req)) return claimed;
  return req.socket.remoteAddress ?? 'unknown';
}

/** Hashed so that an arbitrary path segment cannot make keys arbitrarily long. */
function limitKey(address: string, tenantId: string): string {
  return `host-fetch:${createHash('sha256').update(`${address}\n${tenantId}`).digest('base64url')}`;
}
