import { monotonicClock, RelayError, withTimeout, type Clock, type Logger } from '@service-relay/core';
import type { FeedPage, FeedStore } from '../store/feed-store';
import type { FeedMirror } from './feed-mirror';

/** A ChangesSince read from PostgreSQL not done within this is answered from the mirror (a consumer waits up to 2 s; the lease is 2 s by default). */
const DATABASE_DEADLINE_MS = 1000;
/** After PostgreSQL failed, consumers are answered from the mirror at once; it is tried again this often. */
const RETRY_DATABASE_MS = 1000;

export type FeedAnswer = FeedPage & { source: 'database' | 'mirror' };

/**
 * Where a consumer's ChangesSince is answered from: PostgreSQL (its report
 * recorded, then the changes after it, in one snapshot), or, when PostgreSQL
 * cannot answer in time, the feed mirror. No change can commit while
 * PostgreSQL is unreachable, so the mirror (which every commit reaches before
 * its admin call waits) is all a consumer needs to stay current: tenants
 * whose state did not change stay served through a PostgreSQL outage
 * (docs/OPERATIONS.md "Single faults").
 */
export class FeedAnswers {
  private databaseRetryAt = 0;

  constructor(
    private readonly feed: FeedStore,
    private readonly mirror: FeedMirror | undefined,
    private readonly onProgress: () => void,
    private readonly logger: Logger,
    private readonly clock: Clock = monotonicClock,
  ) {}

  async changesSince(consumerId: string, kind: string, applied: number, leaseMs: number, limit: number): Promise<FeedAnswer> {
    if (!this.mirror || this.clock.now() >= this.databaseRetryAt) {
      try {
        const page = await withTimeout(this.fromDatabase(consumerId, kind, applied, leaseMs, limit), DATABASE_DEADLINE_MS);
        if (this.databaseRetryAt !== 0) this.logger.info('tenant feed answered from the database again');
        this.databaseRetryAt = 0;
        return { ...page, source: 'database' };
      } catch (err) {
        if (!this.mirror) throw err;
        if (this.databaseRetryAt === 0) this.logger.warn({ err: (err as Error).message }, 'database unreachable: answering the tenant feed from its mirror');
        this.databaseRetryAt = this.clock.now() + RETRY_DATABASE_MS;
      }
    }
    const page = await this.mirror.read(applied, limit, leaseMs);
    if (!page) throw new RelayError('unavailable', 'database unreachable and the feed mirror holds nothing');
    return { latestSeq: page.latestSeq, changes: page.changes, reset: page.reset, source: 'mirror' };
  }

  private async fromDatabase(consumerId: string, kind: string, applied: number, leaseMs: number, limit: number): Promise<FeedPage> {
    const page = await this.feed.recordAndRead(consumerId, kind, applied, leaseMs, limit);
    this.onProgress();
    return page;
  }
}
