import { RelayError } from '@service-relay/core';
import type { AuditRecord } from '../audit/audit-store';

/** One entry of GET /admin/audit (docs/API.md). */
export interface AuditEntryView {
  at: string;
  actor: string;
  action: string;
  method: string;
  tenant_id: string | null;
  status: number;
  error: string | null;
  request_id: string;
  client_address: string | null;
  suppressed: number;
}

export function toAuditView(r: AuditRecord): AuditEntryView {
  return {
    at: r.at.toISOString(),
    actor: r.actor,
    action: r.action,
    method: r.method,
    tenant_id: r.tenantId,
    status: r.status,
    error: r.error,
    request_id: r.requestId,
    client_address: r.clientAddress,
    suppressed: r.suppressed,
  };
}

/** next_cursor of the audit list: opaque to clients; base64url of the last entry's position. */
export function encodeAuditCursor(id: number): string {
  return Buffer.from(JSON.stringify(['audit', id])).toString('base64url');
}

/** Throws invalid_query for anything encodeAuditCursor did not make. */
export function decodeAuditCursor(cursor: string): number {
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(cursor)) throw new RelayError('invalid_query');
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new RelayError('invalid_query');
  }
  if (!Array.isArray(v) || v.length !== 2 || v[0] !== 'audit' || !Number.isSafeInteger(v[1]) || (v[1] as number) < 1) throw new RelayError('invalid_query');
  return v[1] as number;
}
