import type { Request } from 'express';
import { isCanonicalUuid, RelayError } from '@service-relay/core';
import type { TenantAction } from '../tenants/tenant-admin';

/** The path's tenant id; `invalid_tenant_id` unless canonical. */
export function tenantIdParam(req: Request): string {
  const id = req.params.id;
  if (typeof id !== 'string' || !isCanonicalUuid(id)) throw new RelayError('invalid_tenant_id');
  return id;
}

/** The request's JSON body (read as a Buffer before); `invalid_body` when absent, empty or not JSON. */
export function jsonBody(req: Request): unknown {
  const body: unknown = req.body;
  if (!Buffer.isBuffer(body) || body.length === 0) throw new RelayError('invalid_body');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new RelayError('invalid_body');
  }
}

/** The only query parameter allowed, `?<name>=true|false` (absent: false); a problem text for anything else. */
export function parseFlag(query: Request['query'], name: string): boolean | string {
  const extra = Object.keys(query).filter((k) => k !== name);
  if (extra.length > 0) return `unknown query parameter ${extra[0]!.slice(0, 40)}`;
  const v = query[name];
  if (v === undefined || v === 'false') return false;
  if (v === 'true') return true;
  return `${name} is true or false`;
}

/**
 * The action a POST under /admin/tenants/{id}/ runs: `host_sync/rotate` takes
 * `?keep_previous=true` (#33: the replaced secret stays accepted); the other
 * actions ignore their query, as they always have.
 */
export function actionWithQuery(action: TenantAction, query: Request['query']): { action: TenantAction; problem?: string } {
  if (action !== 'rotate_host_sync') return { action };
  const keep = parseFlag(query, 'keep_previous');
  if (typeof keep === 'string') return { action, problem: keep };
  return { action: keep ? 'rotate_host_sync_keep_previous' : action };
}
