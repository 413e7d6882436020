import { isCanonicalUuid, RelayError } from '@service-relay/core';
import type { ListPosition } from '../tenants/tenant';

/** next_cursor: opaque to clients; base64url of the last (created_at, tenant_id). */
export function encodeCursor(p: ListPosition): string {
  return Buffer.from(JSON.stringify([p.createdAt.toISOString(), p.tenantId])).toString('base64url');
}

/** Throws invalid_query for anything encodeCursor did not make. */
export function decodeCursor(cursor: string): ListPosition {
  if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw new RelayError('invalid_query');
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new RelayError('invalid_query');
  }
  if (!Array.isArray(v) || v.length !== 2 || typeof v[0] !== 'string' || !isCanonicalUuid(v[1])) throw new RelayError('invalid_query');
  const createdAt = new Date(v[0]);
  if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== v[0]) throw new RelayError('invalid_query');
  return { createdAt, tenantId: v[1] };
}

/** limit=1..100, default 50. */
export function parseLimit(raw: unknown): number {
  if (raw === undefined) return 50;
  if (typeof raw !== 'string' || !/^\d{1,3}$/.test(raw)) throw new RelayError('invalid_query');
  const n = Number(raw);
  if (n < 1 || n > 100) throw new RelayError('invalid_query');
  return n;
}
