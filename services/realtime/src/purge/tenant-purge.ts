import { withTimeout, type Logger } from '@service-relay/core';
import type { TenantEvent } from '@service-relay/tenant-events';

/** One kind of a tenant's data this instance removes when the tenant is deleted. */
export interface TenantPurger {
  /** For logs: history, presence, connection_counts. */
  name: string;
  purge(tenantId: string): Promise<unknown>;
}

/** Attempts for a purge that failed (Redis unreachable), a few seconds apart, before it is left to the next DELETE. */
const MAX_ATTEMPTS = 5;
const RETRY_MS = 2000;

export interface TenantPurgeOptions {
  purgers: TenantPurger[];
  logger: Logger;
  /**
   * How long the feed handler waits for the purge before it lets the change
   * count as applied anyway (the purge goes on): well inside the feed lease,
   * so a slow purge (a huge keyspace to SCAN) never costs this instance its
   * lease. Default 500 ms.
   */
  budgetMs?: number;
  /** Counts purges by outcome (done, retrying, failed). */
  onOutcome?: (outcome: 'done' | 'retrying' | 'failed') => void;
}

/**
 * Removes a deleted tenant's data held by this realtime instance (#30):
 * history, presence and connection counts, in Redis or in this process (the
 * embedded journal included). A tenant feed handler for `deleted` changes;
 * Revocation, which closes the tenant's connections, runs before it for the
 * same change. The admin call's 200 waits for this handler, so the purge has
 * run on every instance that reported, unless it outlasted its budget or
 * failed: then it is logged, goes on (or is retried a few times) in the
 * background, and a repeated DELETE runs it again. Never throws: a failed
 * purge must not stop the feed (which would cut this instance off).
 */
export class TenantPurge {
  private readonly budgetMs: number;

  constructor(private readonly opts: TenantPurgeOptions) {
    this.budgetMs = opts.budgetMs ?? 500;
  }

  async onEvent(event: TenantEvent): Promise<void> {
    if (event.kind !== 'deleted') return;
    const running = this.run(event.tenant_id, 1);
    await withTimeout(running, this.budgetMs).catch(() => {
      this.opts.logger.warn({ tenant_id: event.tenant_id, budget_ms: this.budgetMs }, 'tenant purge still running past its budget; it goes on in the background');
    });
  }

  /** Resolves when every purger finished or the attempts are spent; never rejects. */
  private async run(tenantId: string, attempt: number): Promise<void> {
    const started = Date.now();
    const results = await Promise.allSettled(this.opts.purgers.map((p) => p.purge(tenantId)));
    const failed = this.opts.purgers.filter((_, i) => results[i]!.status === 'rejected').map((p) => p.name);
    if (failed.length === 0) {
      this.opts.onOutcome?.('done');
      this.opts.logger.info({ tenant_id: tenantId, attempt, took_ms: Date.now() - started }, 'deleted tenant purged');
      return;
    }
    const err = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')!.reason as Error;
    if (attempt >= MAX_ATTEMPTS) {
      this.opts.onOutcome?.('failed');
      this.opts.logger.error({ tenant_id: tenantId, failed, err: err?.message }, 'deleted tenant not purged after every attempt; DELETE the tenant again');
      return;
    }
    this.opts.onOutcome?.('retrying');
    this.opts.logger.warn({ tenant_id: tenantId, failed, attempt, err: err?.message }, 'deleted tenant purge failed; retrying');
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref());
    return this.run(tenantId, attempt + 1);
  }
}
