import { createRedis, redisReady, withTimeout, type Logger, type Redis, type RedisTarget } from '@service-relay/core';
import { MAX_FEED_PAGE, type FeedChange } from '../store/feed-store';
import type { FeedMirror, FeedSource, MirrorAppend } from './feed-mirror';
import { defineFeedMirrorCommands, type FeedMirrorCommands } from './redis-feed-mirror-scripts';

/** Changes the mirror keeps: far more than a consumer falls behind within one outage. */
const KEEP = 10_000;
/** A mirror call not answered within this counts as failed (a frozen Redis must not hold an admin call or a feed answer). */
const DEADLINE_MS = 250;
/**
 * ioredis's own timeout only clears commands a frozen Redis never answers:
 * withTimeout enforces DEADLINE_MS, and unlike ioredis's timer it takes an
 * answer that arrived while this process was busy past the deadline (under
 * event-loop lag a 250 ms ioredis timeout failed every call, and a mirror
 * that never started left consumers nothing to read in a PostgreSQL outage).
 */
const COMMAND_TIMEOUT_MS = 4 * DEADLINE_MS;
/** Covers clock-rate differences between a consumer and Redis over a lease, as the database path does. */
const LEASE_MARGIN_MS = 100;

interface WireChange {
  s: number;
  t: string;
  k: string;
  v: number;
  r: number[];
  d?: Readonly<Record<string, unknown>>;
}

function encode(c: FeedChange): string {
  const w: WireChange = { s: c.seq, t: c.tenantId, k: c.kind, v: c.version, r: c.revokedKeyVersions };
  if (c.detail !== undefined) w.d = c.detail;
  return JSON.stringify(w);
}

function decode(json: string): FeedChange {
  const w = JSON.parse(json) as WireChange;
  return { seq: w.s, tenantId: w.t, kind: w.k, version: w.v, revokedKeyVersions: w.r, ...(w.d !== undefined && { detail: w.d }) };
}

/** The feed mirror in Redis (one hash tag: one Cluster slot), shared by every registry replica. */
export class RedisFeedMirror implements FeedMirror {
  private readonly redis: FeedMirrorCommands;
  private readonly log: string;
  private readonly meta: string;

  constructor(url: RedisTarget, prefix: string, logger: Logger) {
    const redis: Redis = createRedis(url, { connectionName: `${prefix}registry-feed-mirror`, commandTimeout: COMMAND_TIMEOUT_MS });
    redis.on('error', (err: Error) => logger.debug({ err: err.message }, 'feed mirror redis error'));
    this.redis = defineFeedMirrorCommands(redis);
    this.log = `${prefix}{feed-mirror}:log`;
    this.meta = `${prefix}{feed-mirror}:meta`;
  }

  /** One script call within the deadline; a connection still (re)opening gets that long to be ready. */
  private async call<T>(run: (r: FeedMirrorCommands) => Promise<T>): Promise<T> {
    if (this.redis.status !== 'ready') await redisReady(this.redis, DEADLINE_MS);
    return withTimeout(run(this.redis), DEADLINE_MS);
  }

  async append(changes: readonly FeedChange[]): Promise<MirrorAppend> {
    const pairs = changes.flatMap((c) => [c.seq, encode(c)]);
    const [held, until, now] = await this.call((r) => r.relayFeedAppend(this.log, this.meta, KEEP, ...pairs));
    return { held: held === 1, degradedForMs: Math.max(0, Number(until) - Number(now)) };
  }

  async repair(source: FeedSource): Promise<void> {
    // The mirror first, then PostgreSQL: whatever the mirror held was committed
    // before, so PostgreSQL below it has lost commits (or is another database).
    const [base, contig, latestHeld] = await this.call((r) => r.relayFeedMeta(this.log, this.meta));
    const latest = await source.latestSeq();
    if (base === null) {
      await this.call((r) => r.relayFeedInit(this.log, this.meta, latest, 0));
      return;
    }
    if (latest < Number(latestHeld)) {
      await this.call((r) => r.relayFeedInit(this.log, this.meta, latest, 1));
      return;
    }
    let after = Number(contig);
    for (let page = 0; page < 10 && after < latest; page++) {
      const p = await source.changesSince(after, MAX_FEED_PAGE);
      if (p.reset || p.changes.length === 0) {
        // The outbox no longer holds what the mirror lacks: start over at the latest.
        if (p.reset) await this.call((r) => r.relayFeedInit(this.log, this.meta, p.latestSeq, 1));
        return;
      }
      await this.append(p.changes);
      after = p.changes[p.changes.length - 1]!.seq;
    }
  }

  async read(applied: number, limit: number, leaseMs: number) {
    const r = await this.call((c) => c.relayFeedRead(this.log, this.meta, applied, Math.min(Math.max(limit, 1), MAX_FEED_PAGE), leaseMs + LEASE_MARGIN_MS));
    const status = String(r[0]);
    if (status === 'none') return undefined;
    const latestSeq = Number(r[1]);
    return { latestSeq, reset: status === 'reset', granted: Number(r[2]) === 1, changes: r.slice(3).map((j) => decode(String(j))) };
  }

  async ready(): Promise<boolean> {
    if (this.redis.status !== 'ready') return false;
    return withTimeout(this.redis.hexists(this.meta, 'base'), 1000).then(
      (n) => n === 1,
      () => false,
    );
  }

  close(): void {
    this.redis.disconnect();
  }
}
