import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { codeOf, redactUrl, RelayError, type ErrorCode, type Logger } from '@service-relay/core';
import { authorizationOf, bearerToken, rawErrorResponse, WWW_AUTHENTICATE } from '@service-relay/edge';
import type { VerifiedIdentity } from '@service-relay/verifier-client';
import type { WebSocket, WebSocketServer } from 'ws';
import type { Admission, TenantConnections, TenantSlot } from '../limits/tenant-connections';
import type { RealtimeMetrics } from '../metrics';
import type { Scheduler } from '../timers/scheduler';
import type { ConnectionRegistry } from './connection-registry';
import type { BatchMode } from './batch-frame';
import { refuseOverTenantLimit } from './tenant-limit-refusal';
import type { TenantLimitsView } from '../limits/tenant-limits-cache';
import type { TenantRefusals } from '../limits/refusals';

export const WS_PATH = '/ws';
const BEARER_CHALLENGE = `WWW-Authenticate: ${WWW_AUTHENTICATE.invalidToken}\r\n`;

export interface UpgradeOptions {
  wss: WebSocketServer;
  registry: ConnectionRegistry;
  scheduler: Scheduler;
  metrics: RealtimeMetrics;
  logger: Logger;
  /** MAX_CONNECTIONS_PER_TENANT across instances; without it every verified client is admitted. */
  tenantConnections?: TenantConnections;
  /** Per-tenant limits (#30): the tenant's `max_connections`; absent, the counter's own limit. */
  limits?: TenantLimitsView;
  /** Told of every refusal by the tenant connection limit. */
  refusals?: TenantRefusals;
  /** Which webhook events the tenant wants (#32): asked for beside its limits, so a connection's first events are decided on the answer. */
  webhookInterest?: { load(tenantId: string): void | Promise<unknown> };
  /** `slot` is the tenant connection slot the connection must release when its socket closes; `batch`: the batch frames the client asked for. */
  accept(ws: WebSocket, identity: VerifiedIdentity, token: string, slot: TenantSlot, batch: BatchMode): void;
}

/**
 * The HTTP server's 'upgrade' listener: the token is verified before the
 * handshake is answered, so a refused client never gets a WebSocket, only the
 * contract's 401 (or 503 when the verifier cannot answer).
 */
export function createUpgradeHandler(opts: UpgradeOptions): (req: IncomingMessage, socket: Duplex, head: Buffer) => Promise<void> | void {
  // One line a second at most: a tenant at its limit reconnecting in a loop must not flood the log.
  let lastTenantLimitLog = -Infinity;
  return (req, socket, head) => {
    // A client that vanishes mid-check must not crash the process.
    socket.on('error', ignoreSocketError);
    const url = req.url ?? '/';
    if (url.split('?', 1)[0] !== WS_PATH) return reject(socket, 'not_found');
    const token = tokenOf(req);
    if (token === undefined) return refuse(opts, socket, 'invalid_or_missing_token', url, 'missing');
    // Returned so a tracing wrapper knows when the check is over.
    return opts.registry.verifyFresh(token).then(
      (result) => {
        if (socket.destroyed) return;
        if (!result.valid) return refuse(opts, socket, 'invalid_or_missing_token', url, result.reason);
        if (result.identity.expiresAt * 1000 <= opts.scheduler.now()) return refuse(opts, socket, 'invalid_or_missing_token', url, 'expired');
        let identity = result.identity;
        return admit(opts, result.identity.tenantId).then(async (admission) => {
          // A change of the tenant applied while the slot was being taken
          // closed the tenant's connections without this one: its token is
          // judged again on state after it (else a disabled tenant's client
          // could be admitted after the admin call's 200). Bounded: a tenant
          // changing on every turn fails this upgrade closed.
          for (let turn = 0; admission.ok && !socket.destroyed && !opts.registry.isFresh(identity); turn++) {
            const again = turn < 2 ? await opts.registry.verifyFresh(token).catch((err: unknown) => err as Error) : new RelayError('auth_unavailable', 'tenant kept changing');
            const same = !(again instanceof Error) && again.valid && again.identity.tenantId === result.identity.tenantId;
            if (!same) {
              admission.slot.release();
              if (socket.destroyed) return;
              if (again instanceof Error) return refuseVerifierFailure(opts, socket, url, again);
              return refuse(opts, socket, 'invalid_or_missing_token', url, again.valid ? 'tenant changed' : again.reason);
            }
            identity = again.identity;
          }
          // From here to the connection's registration nothing yields: a change applied after it closes it.
          if (socket.destroyed) {
            if (admission.ok) admission.slot.release();
            return;
          }
          opts.metrics.upgrades.inc({ result: admission.ok ? 'accepted' : 'tenant_limit' });
          let upgraded = false;
          // The 101 answer and the `ready` frame leave in one write (a loopback write is a
          // syscall that also wakes the peer: the 101 alone was ~10% of realtime's CPU per connect).
          socket.cork();
          process.nextTick(uncork, socket);
          opts.wss.handleUpgrade(req, socket, head, (ws) => {
            upgraded = true;
            if (!admission.ok) {
              opts.metrics.limitRefusals.inc({ limit: 'tenant_connections' });
              opts.refusals?.refused(identity.tenantId, 'tenant_connections');
              if (opts.scheduler.now() - lastTenantLimitLog >= 1000) {
                lastTenantLimitLog = opts.scheduler.now();
                opts.logger.info({ tenant_id: identity.tenantId, limit: admission.limit }, 'websocket refused: tenant connection limit');
              }
              return refuseOverTenantLimit(ws, admission.limit);
            }
            // ws handles the socket's errors from here on; one listener less per connection.
            socket.removeListener('error', ignoreSocketError);
            opts.accept(ws, identity, token, admission.slot, wantsBatch(url));
          });
          // ws answered a malformed handshake itself (synchronously): no connection holds the slot.
          if (!upgraded && admission.ok) admission.slot.release();
        });
      },
      (err: unknown) => {
        if (socket.destroyed) return;
        refuseVerifierFailure(opts, socket, url, err);
      },
    );
  };
}

const UNLIMITED: Admission = { ok: true, slot: { release: () => {} } };

async function admit(opts: UpgradeOptions, tenantId: string): Promise<Admission> {
  if (!opts.tenantConnections) {
    await opts.webhookInterest?.load(tenantId);
    return UNLIMITED;
  }
  const counter = opts.tenantConnections;
  // The tenant's own limit (#30) and which webhook events it wants (#32): both normally held
  // (nothing to await), neither rejects (the defaults, or every event, when the registry cannot answer).
  const limits = opts.limits?.load(tenantId);
  const interest = opts.webhookInterest?.load(tenantId);
  const own = limits instanceof Promise || interest ? (await Promise.all([limits, interest]))[0] : limits;
  // The drivers answer every failure themselves (docs/OPERATIONS.md "Limits"); anything else fails open too.
  return counter.acquire(tenantId, own?.max_connections).catch((): Admission => UNLIMITED);
}

/**
 * Module-level on purpose: a listener created inside the upgrade handler would
 * share its closure context and keep the request, its headers and the head
 * buffer alive for the whole life of the connection (~3 KB each, measured).
 */
function ignoreSocketError(): void {}

/** `batch=1` in the query: the client takes `batch` frames; `batch=2`: compact ones (PROTOCOL.md "Batched delivery"). */
function wantsBatch(url: string): BatchMode {
  const q = url.indexOf('?');
  const asked = q < 0 ? null : new URLSearchParams(url.slice(q + 1)).get('batch');
  return asked === '1' ? 'frames' : asked === '2' ? 'compact' : 'none';
}

function uncork(socket: Duplex): void {
  socket.uncork();
}

/** `Authorization: Bearer` (scheme in any case) wins; browsers use `access_token`. */
function tokenOf(req: IncomingMessage): string | undefined {
  const header = authorizationOf(req);
  if (header !== undefined) return bearerToken(header);
  const q = (req.url ?? '').indexOf('?');
  if (q < 0) return undefined;
  const token = new URLSearchParams(req.url!.slice(q + 1)).get('access_token');
  return token ? token : undefined;
}

function refuse(opts: UpgradeOptions, socket: Duplex, code: ErrorCode, url: string, reason: string): void {
  opts.metrics.upgrades.inc({ result: code === 'invalid_or_missing_token' ? 'refused' : 'unavailable' });
  // The URL may carry the token in its query: only the redacted form is logged.
  opts.logger.info({ url: redactUrl(url), reason, code }, 'websocket upgrade refused');
  reject(socket, code);
}

/** The verifier could not answer: 503 when it said so, else a plain internal error; never let in. */
function refuseVerifierFailure(opts: UpgradeOptions, socket: Duplex, url: string, err: unknown): void {
  refuse(opts, socket, codeOf(err) === 'auth_unavailable' ? 'auth_unavailable' : 'internal', url, 'verifier failed');
}

function reject(socket: Duplex, code: ErrorCode): void {
  socket.end(rawErrorResponse(code, code === 'invalid_or_missing_token' ? BEARER_CHALLENGE : ''));
}
