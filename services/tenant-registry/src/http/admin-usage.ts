import { errorBody, RelayError, type ErrorCode } from '@service-relay/core';
import type { Request } from 'express';
import { addInto, emptyCounts, type UsageStore } from '../store/usage-store';
import type { TenantAdmin } from '../tenants/tenant-admin';
import { parseLimit } from './list-cursor';
import { decodeUsageCursor, encodeUsageCursor, parseUsageSort, parseUsageWindow, usageBucketView, usageCountsView, UsageQueryProblem, windowView } from './usage-query';

export interface AdminAnswer {
  status: number;
  body: unknown;
  error?: ErrorCode;
}

/** The admin API's usage reads (#30): one tenant's buckets, and every tenant's totals sorted and paged. */
export class AdminUsage {
  constructor(
    private readonly store: UsageStore,
    private readonly admin: TenantAdmin,
    private readonly now: () => number = Date.now,
  ) {}

  /** GET /admin/tenants/{id}/usage. A tenant that does not exist and has no usage kept is tenant_not_found. */
  async tenant(req: Request, tenantId: string): Promise<AdminAnswer> {
    return problemAnswer(async () => {
      const w = parseUsageWindow(req.query, this.now());
      const buckets = await this.store.tenantUsage(tenantId, w.fromMs, w.toMs, w.granularity);
      if (buckets.length === 0 && !(await this.admin.get(tenantId))) throw new RelayError('tenant_not_found');
      const totals = emptyCounts();
      for (const b of buckets) addInto(totals, b);
      return { status: 200, body: { tenant_id: tenantId, ...windowView(w), totals: usageCountsView(totals), buckets: buckets.map(usageBucketView) } };
    });
  }

  /** GET /admin/usage: tenants with usage in the window, by `sort` descending, `limit` a page. */
  async all(req: Request): Promise<AdminAnswer> {
    return problemAnswer(async () => {
      const w = parseUsageWindow(req.query, this.now());
      const sort = parseUsageSort(req.query.sort);
      const limit = parseLimit(req.query.limit);
      const after = decodeUsageCursor(sort, req.query.cursor);
      const page = await this.store.listUsage(w.fromMs, w.toMs, w.granularity, sort, limit, after);
      return {
        status: 200,
        body: {
          ...windowView(w),
          sort,
          tenants: page.tenants.map((t) => ({ tenant_id: t.tenantId, totals: usageCountsView(t.totals), buckets: t.buckets.map(usageBucketView) })),
          next_cursor: page.next ? encodeUsageCursor(sort, page.next) : null,
        },
      };
    });
  }
}

async function problemAnswer(fn: () => Promise<AdminAnswer>): Promise<AdminAnswer> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof UsageQueryProblem) return { status: 400, body: errorBody('invalid_query', { problem: err.message }), error: 'invalid_query' };
    throw err;
  }
}
