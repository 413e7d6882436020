import express, { type NextFunction, type Request, type Response } from 'express';
import { redactUrl, type Logger } from '@service-relay/core';
import { requestIdOf, sendError } from '@service-relay/edge';
import type { AdminTokens } from '../audit/admin-tokens';
import type { AuditLog } from '../audit/audit-log';
import type { RegistryMetrics } from '../metrics';
import type { HostSyncCheck } from '../tenants/host-sync-check';
import type { TenantAdmin } from '../tenants/tenant-admin';
import type { LimitsAdmin } from '../tenants/limits-admin';
import type { CallbacksAdmin } from '../tenants/callbacks-admin';
import { adminRouter } from './admin-router';
import { hostApi, type HostApiDeps } from './host-api';
import { hostSyncFetch, type HostFetchLimit } from './host-sync-fetch';
import { bindRequestLog, requestLog } from './request-log';
import { errorCodeFor, NO_STORE } from './send';
import type { TokenExplainer } from '../verifier/token-explainer';
import type { AdminUsage } from './admin-usage';
import type { AdminLive } from './admin-live';
import { consoleFiles, type ConsoleFiles } from './console-files';
import type { WebhooksAdmin } from '../webhooks/webhooks-admin';
import type { SecretsKeyStatus } from '../secrets/secrets-key-status';

export interface AppDeps {
  admin: TenantAdmin;
  hostSync: HostSyncCheck;
  adminTokens: AdminTokens;
  audit: AuditLog;
  metrics: RegistryMetrics;
  logger: Logger;
  /** Failed host-sync fetches are rate-limited when given (the server always gives it). */
  hostFetch?: HostFetchLimit;
  /** The host server API (#13); absent, only the fetch is served under /api/host. */
  hostApi?: Omit<HostApiDeps, 'hostSync' | 'metrics' | 'logger' | 'limit'>;
  /** The admin API's explain_token (#29); absent, that route answers 404. */
  explainer?: TokenExplainer;
  /** The admin API's usage reads (#30); absent, those routes answer 404. */
  usage?: AdminUsage;
  /** Plans and per-tenant limits (#30); absent, those routes answer 404. */
  limits?: LimitsAdmin;
  /** Subscribe/publish callbacks (#32), for the admin API and the host server API; absent, those routes answer 404. */
  callbacks?: CallbacksAdmin;
  /** GET /admin/live (#31); absent, that route answers 404. */
  live?: AdminLive;
  /** The operator console's built files (#31, readConsoleFiles), served at /console/; absent, /console/ answers 404. */
  consoleFiles?: ConsoleFiles | undefined;
  /** Webhook endpoints (#32), on the admin and the host server API; absent, those routes answer 404. */
  webhooks?: WebhooksAdmin;
  /** GET /admin/secrets-key (#33); absent, that route answers 404. */
  secretsKey?: { status(): Promise<SecretsKeyStatus> };
}

/** The registry's HTTP API: host-sync fetch and admin API (ops endpoints are served in front of it). */
export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');

  app.use((req, res, next) => {
    // Same rule as the gateway, which sends its id upstream.
    const requestId = requestIdOf(req.headers['x-request-id']);
    res.setHeader('x-request-id', requestId);
    const log = bindRequestLog(res, deps.logger, requestId);
    const started = performance.now();
    res.on('finish', () => {
      log.info(
        { method: req.method, path: redactUrl(req.originalUrl).slice(0, 256), status: res.statusCode, ms: Math.round(performance.now() - started) },
        'request',
      );
    });
    next();
  });

  app.use(hostSyncFetch(deps.hostSync, deps.metrics, deps.logger, deps.hostFetch));
  if (deps.hostApi) app.use(hostApi({ ...deps.hostApi, callbacks: deps.callbacks, hostSync: deps.hostSync, metrics: deps.metrics, logger: deps.logger, limit: deps.hostFetch }));
  if (deps.consoleFiles) app.use('/console', consoleFiles(deps.consoleFiles));
  if (deps.hostApi) app.use(hostApi({ ...deps.hostApi, callbacks: deps.callbacks, ...(deps.webhooks && { webhooks: deps.webhooks }), hostSync: deps.hostSync, metrics: deps.metrics, logger: deps.logger, limit: deps.hostFetch }));
  app.use('/admin', adminRouter({ ...deps, users: deps.hostApi?.users }));
  app.use((_req, res) => sendError(res, 'not_found', NO_STORE));

  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (res.headersSent) return;
    const code = errorCodeFor(err);
    if (code === 'internal') requestLog(res, deps.logger).error({ err }, 'request failed');
    sendError(res, code, NO_STORE);
  });

  return app;
}
