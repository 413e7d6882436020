import { RelayError } from '@service-relay/core';
import pg from 'pg';
import type { Db, Queryable } from './db';
import { classifyDbError, isServerSilence, isStatementError } from './db-errors';

export interface PgDbOptions {
  /** Connections this pool opens at most. */
  max: number;
  /**
   * The budget of one operation (a statement, or a whole transaction), from
   * asking the pool for a connection to the last answer. Past it the
   * operation fails `unavailable`; a connection whose statement got no answer
   * is destroyed, never reused (its server-side transaction rolls back when
   * the server reads the close).
   */
  timeoutMs: number;
  /** application_name of the pool's connections (pg_stat_activity). */
  name: string;
  /**
   * While the server does not answer (a statement or a new connection timed
   * out: it is hung), operations fail `unavailable` at once instead of each
   * waiting out its budget, and one probe (`SELECT 1`) is sent this often
   * until one is answered. A server that refuses (down, restarting) is asked
   * by every operation: that costs nothing and serves again at its first
   * answer. 0: no such short-circuit (maintenance work).
   */
  probeMs: number;
}

/** Server-side backstops: a statement the client gave up on is cancelled; a transaction whose client vanished is ended. */
const IDLE_IN_TRANSACTION_MS = 10_000;

export const DEFAULT_PG_OPTIONS: Readonly<PgDbOptions> = Object.freeze({ max: 10, timeoutMs: 600, name: 'tenant-registry', probeMs: 200 });

/**
 * PostgreSQL through a pg Pool; each transaction holds one pooled client.
 * A server that is down or hung (its processes stopped: sockets open, nothing
 * answers) is `unavailable` within `timeoutMs`, never a pg read timeout that
 * surfaces as a 500, and never a wait of several statement timeouts.
 */
export class PgDb implements Db {
  private readonly pool: pg.Pool;
  private readonly opts: PgDbOptions;
  /** Set while the server is known not to answer; cleared by the first answered probe or operation. */
  private silentSince: number | undefined;
  private probe: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(url: string, opts: Partial<PgDbOptions> = {}) {
    this.opts = { ...DEFAULT_PG_OPTIONS, ...opts };
    const { max, timeoutMs, name } = this.opts;
    this.pool = new pg.Pool({
      connectionString: url,
      max,
      application_name: name,
      // Waiting for a pooled client and opening a new connection both count against the budget.
      connectionTimeoutMillis: timeoutMs,
      statement_timeout: timeoutMs,
      idle_in_transaction_session_timeout: Math.max(IDLE_IN_TRANSACTION_MS, timeoutMs * 2),
      keepAlive: true,
    });
    // An idle client losing its connection must not crash the process; the
    // next query gets a fresh one.
    this.pool.on('error', () => {});
  }

  /** The server is known not to answer (operations fail at once until a probe is answered). */
  get silent(): boolean {
    return this.silentSince !== undefined;
  }

  query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    return this.run(async (c) => c.query<R>(sql, params));
  }

  async exec(sql: string): Promise<void> {
    await this.query(sql);
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.run(async (c) => {
      await c.query('BEGIN');
      try {
        const result = await fn(c);
        await c.query('COMMIT');
        return result;
      } catch (err) {
        await c.rollback();
        throw err;
      }
    });
  }

  async ping(): Promise<boolean> {
    try {
      await this.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.probe);
    this.probe = undefined;
    await this.pool.end();
  }

  /** One operation on one pooled client, within the budget; errors come out classified. */
  private async run<T>(fn: (c: Connection) => Promise<T>, probing = false): Promise<T> {
    if (this.silentSince !== undefined && !probing) throw new RelayError('unavailable', 'database not answering');
    const deadline = performance.now() + this.opts.timeoutMs;
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw this.failed(err);
    }
    const conn = new Connection(client, deadline);
    try {
      const result = await fn(conn);
      this.answered();
      return result;
    } catch (err) {
      throw this.failed(err);
    } finally {
      conn.release();
    }
  }

  private answered(): void {
    if (this.silentSince === undefined) return;
    this.silentSince = undefined;
    clearTimeout(this.probe);
    this.probe = undefined;
  }

  private failed(err: unknown): unknown {
    if (this.opts.probeMs > 0 && !this.closed && isServerSilence(err) && this.silentSince === undefined) {
      this.silentSince = performance.now();
      this.scheduleProbe();
    }
    return classifyDbError(err);
  }

  private scheduleProbe(): void {
    this.probe = setTimeout(() => {
      this.run((c) => c.query('SELECT 1'), true).then(
        () => this.answered(),
        () => {
          if (this.silentSince !== undefined && !this.closed) this.scheduleProbe();
        },
      );
    }, this.opts.probeMs);
    this.probe.unref();
  }
}

/**
 * A pooled client within one operation's budget. A statement that is not
 * answered in time, or a lost connection, marks the client broken: it is
 * destroyed on release instead of going back to the pool.
 */
class Connection implements Queryable {
  private broken = false;
  private readonly onLost = () => {
    this.broken = true;
  };

  constructor(
    private readonly client: pg.PoolClient,
    private readonly deadline: number,
  ) {
    // A held client whose connection drops emits 'error' (the pool listens only
    // to idle ones); unheard, that would crash the process.
    client.on('error', this.onLost);
  }

  async query<R>(sql: string, params: readonly unknown[] = []): Promise<R[]> {
    const left = Math.floor(this.deadline - performance.now());
    if (left <= 0) {
      this.broken = true;
      throw new RelayError('unavailable', 'database operation out of time');
    }
    try {
      // pg reads query_timeout per statement too (its typings know only the pool-wide one).
      const statement = { text: sql, values: params as unknown[], query_timeout: left } as pg.QueryConfig;
      const res = await this.client.query(statement);
      return res.rows as R[];
    } catch (err) {
      // Only a statement error leaves the connection usable; anything else (a timeout, a lost connection) destroys it.
      if (!isStatementError(err)) this.broken = true;
      throw err;
    }
  }

  async exec(sql: string): Promise<void> {
    await this.query(sql);
  }

  /** Within what is left of the budget; a client that cannot roll back is destroyed (the server rolls back on close). */
  async rollback(): Promise<void> {
    if (this.broken) return;
    try {
      await this.query('ROLLBACK');
    } catch {
      this.broken = true;
    }
  }

  release(): void {
    this.client.off('error', this.onLost);
    this.client.release(this.broken);
  }
}
