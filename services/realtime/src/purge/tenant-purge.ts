import type { Logger } from '@service-relay/core';
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
  /** Counts purges by outcome (done, retrying, failed). */
  onOutcome?: (outcome: 'done' | 'retrying' | 'failed') => void;
}

/**
 * Removes a deleted tenant's data held by this realtime instance (#30):
 * history, presence and connection counts, in Redis or in this process (the
 * embedded journal included). A tenant feed handler for `deleted` changes;
 * Revocation, which closes the tenant's connections, runs before it for the
 * same change.
 *
 * The handler only starts the purge: while a feed handler runs, the feed is
 * behind the change it knows of, so it is not current, and FeedCutoff closes
 * every connection of the instance (1013) if that lasts past its next check.
 * A SCAN of a large keyspace or a journal rewrite must not do that. So the
 * admin call's 200 means the tenant's connections are closed and its tokens
 * refused everywhere, and every instance has begun purging; each one reports
 * the end in its log and in relay_realtime_tenant_purges_total{outcome}. A
 * purge that fails (Redis unreachable) is retried a few times, then left to
 * a repeated DELETE. Never throws.
 */
export class TenantPurge {
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly opts: TenantPurgeOptions) {}

  onEvent(event: TenantEvent): void {
    if (event.kind !== 'deleted') return;
    const run = this.run(event.tenant_id, 1);
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  /** Resolves once every purge started so far has ended (a clean stop, tests). */
  async settled(): Promise<void> {
    await Promise.all([...this.running]);
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
