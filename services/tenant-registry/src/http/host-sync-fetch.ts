import type { NextFunction, Request, Response } from 'express';
import { errorBody, type Logger } from '@service-relay/core';
import type { RegistryMetrics } from '../metrics';
import type { HostSyncCheck } from '../tenants/host-sync-check';
import { parseBasicAuthorization } from './basic-auth';
import { sendError, sendMethodNotAllowed } from './send';

const FETCH_PATH = /^\/api\/host\/tenants\/([^/]*)\/jwt_secret\/fetch\/?$/;

const NO_CACHE = { 'cache-control': 'no-store, private', pragma: 'no-cache' } as const;

// Every failure answers exactly these bytes, whatever the reason was.
const FAILURE_BODY = Buffer.from(errorBody('invalid_host_sync_credentials'));
const FAILURE_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(FAILURE_BODY.length),
  'www-authenticate': 'Basic realm="service-relay"',
  ...NO_CACHE,
};

/**
 * POST /api/host/tenants/{tenant_id}/jwt_secret/fetch (seed section 4).
 * The tenant id is taken from the raw path, undecoded: anything that is not a
 * canonical UUID is simply a tenant that does not exist.
 */
export function hostSyncFetch(check: HostSyncCheck, metrics: RegistryMetrics, logger: Logger) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const m = FETCH_PATH.exec(req.path);
    if (!m) return next();
    if (req.method !== 'POST') return sendMethodNotAllowed(res, 'POST');
    const tenantId = m[1]!;
    let secret: string | undefined;
    try {
      secret = await check.fetchPrimary(tenantId, parseBasicAuthorization(req.headers.authorization));
    } catch (err) {
      metrics.fetch('error');
      logger.error({ err }, 'host-sync fetch failed');
      return sendError(res, 'unavailable');
    }
    if (secret === undefined) {
      metrics.fetch('rejected');
      res.writeHead(401, FAILURE_HEADERS);
      res.end(FAILURE_BODY);
      return;
    }
    metrics.fetch('ok');
    const body = JSON.stringify({ kid: tenantId, algorithm: 'HS256', issuer: 'service-relay', audience: 'service-relay', jwt_secret_primary: secret });
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), ...NO_CACHE });
    res.end(body);
  };
}
