import type { FeedChange, FeedPage } from '../store/feed-store';

/** What an append learned: whether the mirror holds it, and how long leases granted from the mirror may still run. */
export interface MirrorAppend {
  held: boolean;
  /** Milliseconds (on the mirror's clock, from now) during which a consumer may hold a lease granted from the mirror. */
  degradedForMs: number;
}

/** The part of FeedStore a repair reads. */
export interface FeedSource {
  latestSeq(): Promise<number>;
  changesSince(after: number, limit: number): Promise<FeedPage>;
}

/**
 * A copy of the tail of the tenant feed outside PostgreSQL (docs/ARCHITECTURE.md
 * "Feed mirror"): every committed change is appended by the registry that
 * committed it before its admin call waits, and every registry repairs it from
 * PostgreSQL each second. While PostgreSQL cannot be reached, any registry
 * answers consumers from it, so leases of unchanged tenants hold; a lease it
 * grants is counted (`degradedForMs`), so a change committed meanwhile waits
 * it out before its 200.
 */
export interface FeedMirror {
  append(changes: readonly FeedChange[]): Promise<MirrorAppend>;
  /** Brings the mirror level with PostgreSQL (starts it, fills gaps, starts over if PostgreSQL is behind it). */
  repair(source: FeedSource): Promise<void>;
  /**
   * A consumer's ChangesSince answered from the mirror; `granted` when it had
   * applied everything the mirror holds (its lease is counted). Undefined:
   * the mirror holds nothing (never started, or Redis lost it).
   */
  read(applied: number, limit: number, leaseMs: number): Promise<(FeedPage & { granted: boolean }) | undefined>;
  /** Redis answers and the mirror holds the feed (a repair started it): a PostgreSQL outage would leave unchanged tenants served. */
  ready(): Promise<boolean>;
  close(): void;
}
