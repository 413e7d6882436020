import type { ErrorCode } from '@service-relay/core';
import type { WebSocket } from 'ws';
import { TENANT_LIMIT_RETRY_AFTER_MS } from '../limits/tenant-connections';
import { replyFrame } from './client-frame';
import { CLOSE_TOO_MANY_CONNECTIONS } from './close-codes';

/**
 * A connection over its tenant's limit is opened and closed at once instead
 * of refused with an HTTP status: a browser never sees the status of a
 * refused upgrade, but it does see an `error` frame and a close code, so it
 * can wait instead of reconnecting in a tight loop. It never gets `ready`.
 */
export function refuseOverTenantLimit(ws: WebSocket, limit: number): void {
  ws.send(replyFrame({ type: 'error', code: 'too_many_connections' satisfies ErrorCode, limit, retry_after_ms: TENANT_LIMIT_RETRY_AFTER_MS }, undefined));
  ws.close(CLOSE_TOO_MANY_CONNECTIONS, 'too_many_connections');
  // A peer that does not answer the close handshake is cut.
  const timer = setTimeout(() => ws.terminate(), 1000);
  timer.unref();
  ws.once('close', () => clearTimeout(timer));
}
